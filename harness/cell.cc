#include "harness/cell.h"

#include <sstream>

#include "harness/sha256.h"

namespace framegate {

std::string Cell::Pipeline() const {
  if (model_dir.empty()) return "reference:" + size;
  std::string dir = model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  return "model:" + (slash == std::string::npos ? dir : dir.substr(slash + 1));
}

std::string Cell::CanonicalString() const {
  std::ostringstream out;
  out << "v1|pipeline=" << Pipeline() << "|device=" << device << "|policy=" << policy << "|seed=" << seed
      << "|fault=" << fault << "|sampler=" << sampler << "|steps=" << steps << "|guidance=" << guidance;
  return out.str();
}

std::string Cell::Id() const { return Sha256Hex(CanonicalString()).substr(0, 16); }

std::string Cell::Label() const {
  std::string label = Pipeline() + " " + device + " " + policy + " seed=" + std::to_string(seed);
  if (!fault.empty()) label += " fault=" + fault;
  return label;
}

}  // namespace framegate
