#include "store/packed_points.h"

#include <cstring>
#include <map>

namespace framegate {
namespace {

constexpr std::string_view kMagic = "FGP1";

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutBytes(std::string_view bytes, std::string* out) {
  PutVarint(bytes.size(), out);
  out->append(bytes);
}

void PutDouble(double value, std::string* out) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

uint64_t ZigZag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

int64_t UnZigZag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

// The fields of a blob, front to back from *offset; each returns false, leaving *offset
// where the field starts, when the blob ends inside it.
bool ReadVarint(std::string_view blob, size_t* offset, uint64_t* value) {
  *value = 0;
  for (size_t at = *offset, shift = 0; shift < 64 && at < blob.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(blob[at++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return *offset = at, true;
  }
  return false;
}

bool ReadBytes(std::string_view blob, size_t* offset, std::string_view* bytes) {
  size_t at = *offset;
  uint64_t size;
  if (!ReadVarint(blob, &at, &size) || size > blob.size() - at) return false;
  *bytes = blob.substr(at, size);
  *offset = at + size;
  return true;
}

bool ReadDouble(std::string_view blob, size_t* offset, double* value) {
  if (blob.size() - *offset < 8) return false;
  uint64_t bits = 0;
  for (size_t i = 0; i < 8; ++i)
    bits |= static_cast<uint64_t>(static_cast<unsigned char>(blob[*offset + i])) << (8 * i);
  std::memcpy(value, &bits, sizeof(*value));
  *offset += 8;
  return true;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

bool SamePoint(const PackedPoint& a, const PackedPoint& b) {
  return a.cell_id == b.cell_id && a.status == b.status && SameBits(a.latency_median_s, b.latency_median_s) &&
         SameBits(a.min_psnr, b.min_psnr) && SameBits(a.mean_ssim, b.mean_ssim) &&
         SameBits(a.rel_l2, b.rel_l2) && a.cell_row == b.cell_row;
}

}  // namespace

PackedPoint PointOfRow(const SqliteStatement& row) {
  return {row.TextView(0), row.TextView(1), row.Real(2), row.Real(3), row.Real(4), row.Real(5), row.Int(6)};
}

Status PackRunPoints(SqliteDb& db, const std::string& run_id) {
  StatusOr<SqliteStatement> read = db.Prepare(kRunPointsSql);
  if (!read.ok()) return read.status();
  read->Bind(1, run_id);
  std::map<std::string, uint64_t, std::less<>> statuses;
  std::vector<std::string> status_names;
  std::string points;
  uint64_t count = 0;
  int64_t previous_row = 0;
  for (;; ++count) {
    StatusOr<bool> row = read->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    const PackedPoint p = PointOfRow(*read);
    PutBytes(p.cell_id, &points);
    auto [status, added] = statuses.try_emplace(std::string(p.status), statuses.size());
    if (added) status_names.push_back(status->first);
    PutVarint(status->second, &points);
    for (double value : {p.latency_median_s, p.min_psnr, p.mean_ssim, p.rel_l2}) PutDouble(value, &points);
    const uint64_t row_step = static_cast<uint64_t>(p.cell_row) - static_cast<uint64_t>(previous_row);
    PutVarint(ZigZag(static_cast<int64_t>(row_step)), &points);
    previous_row = p.cell_row;
  }
  std::string blob(kMagic);
  PutVarint(status_names.size(), &blob);
  for (const std::string& name : status_names) PutBytes(name, &blob);
  PutVarint(count, &blob);
  blob.append(points);
  StatusOr<SqliteStatement> write =
      db.Prepare("INSERT OR REPLACE INTO packed_points (run_id, points) VALUES (?, ?)");
  if (!write.ok()) return write.status();
  return write->Bind(1, run_id).BindBlob(2, blob).Run();
}

Status PackAllRuns(SqliteDb& db) {
  StatusOr<SqliteStatement> runs = db.Prepare("SELECT run_id FROM runs ORDER BY run_id");
  if (!runs.ok()) return runs.status();
  std::vector<std::string> ids;
  for (;;) {
    StatusOr<bool> row = runs->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ids.push_back(runs->Text(0));
  }
  for (const std::string& id : ids) FG_RETURN_IF_ERROR(PackRunPoints(db, id));
  return Status::Ok();
}

Status PackedPointsReader::Damaged(const std::string& what) const {
  return Status::Corrupt(where_ + ": packed_points blob is damaged at byte " + std::to_string(offset_) +
                         " (" + what + ")");
}

StatusOr<PackedPointsReader> PackedPointsReader::Open(std::string_view blob, const std::string& where) {
  PackedPointsReader reader(blob, where);
  if (blob.substr(0, kMagic.size()) != kMagic) return reader.Damaged("no FGP1 header");
  reader.offset_ = kMagic.size();
  uint64_t statuses;
  // Each status name takes a byte at least: a count above the blob's size is damage.
  if (!ReadVarint(blob, &reader.offset_, &statuses) || statuses > blob.size()) {
    return reader.Damaged("status count");
  }
  reader.statuses_.resize(statuses);
  for (std::string_view& name : reader.statuses_) {
    if (!ReadBytes(blob, &reader.offset_, &name)) return reader.Damaged("status name");
  }
  if (!ReadVarint(blob, &reader.offset_, &reader.left_)) return reader.Damaged("point count");
  return reader;
}

StatusOr<bool> PackedPointsReader::Next(PackedPoint* p) {
  if (left_ == 0) {
    if (offset_ != blob_.size()) return Damaged("bytes after the last point");
    return false;
  }
  uint64_t status, row_step;
  if (!ReadBytes(blob_, &offset_, &p->cell_id) || !ReadVarint(blob_, &offset_, &status) ||
      status >= statuses_.size()) {
    return Damaged("cell id or status");
  }
  p->status = statuses_[status];
  if (!ReadDouble(blob_, &offset_, &p->latency_median_s) || !ReadDouble(blob_, &offset_, &p->min_psnr) ||
      !ReadDouble(blob_, &offset_, &p->mean_ssim) || !ReadDouble(blob_, &offset_, &p->rel_l2) ||
      !ReadVarint(blob_, &offset_, &row_step)) {
    return Damaged("point values");
  }
  p->cell_row =
      static_cast<int64_t>(static_cast<uint64_t>(previous_row_) + static_cast<uint64_t>(UnZigZag(row_step)));
  previous_row_ = p->cell_row;
  --left_;
  return true;
}

Status CheckPackedPoints(SqliteDb& db) {
  StatusOr<SqliteStatement> packs = db.Prepare("SELECT run_id, points FROM packed_points ORDER BY run_id");
  StatusOr<SqliteStatement> rows = db.Prepare(kRunPointsSql);
  if (!packs.ok()) return packs.status();
  if (!rows.ok()) return rows.status();
  for (;;) {
    StatusOr<bool> pack = packs->Step();
    if (!pack.ok()) return pack.status();
    if (!*pack) return Status::Ok();
    const std::string run_id = packs->Text(0);
    const std::string where = db.path() + ": run " + run_id;
    StatusOr<std::vector<PackedPoint>> points = UnpackPoints(packs->BlobView(1), where);
    if (!points.ok()) return points.status();
    rows->Bind(1, run_id);
    size_t i = 0;
    for (;; ++i) {
      StatusOr<bool> row = rows->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const PackedPoint stored = PointOfRow(*rows);
      if (i >= points->size() || !SamePoint((*points)[i], stored)) {
        const std::string cell(stored.cell_id);
        rows->Reset();
        return Status::Corrupt(where + ": packed_points differs from its series_points at cell " + cell +
                               " (DELETE FROM packed_points WHERE run_id = '" + run_id +
                               "' makes regressions read the rows)");
      }
    }
    rows->Reset();
    if (i != points->size()) {
      return Status::Corrupt(where + ": packed_points holds " + std::to_string(points->size()) +
                             " points, its series_points " + std::to_string(i));
    }
  }
}

StatusOr<std::vector<PackedPoint>> UnpackPoints(std::string_view blob, const std::string& where) {
  StatusOr<PackedPointsReader> reader = PackedPointsReader::Open(blob, where);
  if (!reader.ok()) return reader.status();
  std::vector<PackedPoint> points;
  PackedPoint p;
  for (;;) {
    StatusOr<bool> more = reader->Next(&p);
    if (!more.ok()) return more.status();
    if (!*more) return points;
    points.push_back(p);
  }
}

}  // namespace framegate
