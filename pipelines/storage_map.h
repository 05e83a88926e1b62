// StorageMap: a value per tensor storage, for the package observer's bookkeeping (the
// would-be dtype of a value, the op that made it). Keyed by the StorageImpl's address,
// with a weak reference that keeps the StorageImpl object (not its data) allocated, so
// that no later storage can take the address and inherit the entry. Views share their
// base's storage, and so its entry.
#pragma once

#include <unordered_map>
#include <utility>

#include <ATen/core/Tensor.h>

namespace framegate {

template <typename T>
class StorageMap {
 public:
  // Sets the entry of `tensor`'s storage; nothing for an undefined or storage-less tensor.
  void Put(const at::Tensor& tensor, T value) {
    if (!tensor.defined() || !tensor.has_storage()) return;
    const c10::Storage& storage = tensor.storage();
    const c10::StorageImpl* key = storage.unsafeGetStorageImpl();
    entries_.erase(key);
    entries_.emplace(key, Entry{storage.getWeakStorageImpl(), std::move(value)});
  }
  // The entry of `tensor`'s storage; nullptr when it has none.
  const T* Find(const at::Tensor& tensor) const {
    if (!tensor.defined() || !tensor.has_storage()) return nullptr;
    const auto found = entries_.find(tensor.storage().unsafeGetStorageImpl());
    return found == entries_.end() ? nullptr : &found->second.value;
  }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    T value;
  };
  std::unordered_map<const c10::StorageImpl*, Entry> entries_;
};

}  // namespace framegate
