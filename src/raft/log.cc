#include "etcdw/raft/log.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "fatal.h"

namespace etcdw::raft {

// ---------------------------------------------------------------------------------------------
// Unstable

std::optional<uint64_t> Unstable::MaybeFirstIndex() const {
  if (snapshot) return snapshot->metadata().index() + 1;
  return std::nullopt;
}

std::optional<uint64_t> Unstable::MaybeLastIndex() const {
  if (!entries.empty()) return offset + entries.size() - 1;
  if (snapshot) return snapshot->metadata().index();
  return std::nullopt;
}

std::optional<uint64_t> Unstable::MaybeTerm(uint64_t i) const {
  if (i < offset) {
    if (snapshot && snapshot->metadata().index() == i) return snapshot->metadata().term();
    return std::nullopt;
  }
  auto last = MaybeLastIndex();
  if (!last || i > *last) return std::nullopt;
  if (entries.empty()) return snapshot->metadata().term();  // i == snapshot index == offset-1
  return entries[i - offset].term();
}

void Unstable::StableTo(uint64_t i, uint64_t t) {
  auto gt = MaybeTerm(i);
  // Only if the entry is still the one persisted (not replaced meanwhile) and unstable.
  if (gt && *gt == t && i >= offset) {
    entries.erase(entries.begin(), entries.begin() + static_cast<long>(i + 1 - offset));
    offset = i + 1;
  }
}

void Unstable::StableSnapTo(uint64_t i) {
  if (snapshot && snapshot->metadata().index() == i) snapshot.reset();
}

void Unstable::Restore(const raftpb::Snapshot& s) {
  offset = s.metadata().index() + 1;
  entries.clear();
  snapshot = s;
}

void Unstable::TruncateAndAppend(const std::vector<raftpb::Entry>& ents) {
  uint64_t after = ents.front().index();
  if (after == offset + entries.size()) {
    entries.insert(entries.end(), ents.begin(), ents.end());
  } else if (after <= offset) {
    // Replaces every unstable entry.
    offset = after;
    entries = ents;
  } else {
    entries.resize(after - offset);
    entries.insert(entries.end(), ents.begin(), ents.end());
  }
}

std::vector<raftpb::Entry> Unstable::Slice(uint64_t lo, uint64_t hi) const {
  if (lo > hi || lo < offset || hi > offset + entries.size()) {
    Fatal("unstable slice [" + std::to_string(lo) + "," + std::to_string(hi) + ") out of bounds");
  }
  return std::vector<raftpb::Entry>(entries.begin() + static_cast<long>(lo - offset),
                                    entries.begin() + static_cast<long>(hi - offset));
}

// ---------------------------------------------------------------------------------------------
// Log

Log::Log(const Storage* storage, uint64_t max_committed_size_per_ready)
    : storage_(storage), max_next_size_(max_committed_size_per_ready) {
  uint64_t first = storage->FirstIndex();
  uint64_t last = storage->LastIndex();
  unstable_.offset = last + 1;
  committed_ = first - 1;
  applied_ = first - 1;
}

uint64_t Log::FirstIndex() const {
  if (auto i = unstable_.MaybeFirstIndex()) return *i;
  return storage_->FirstIndex();
}

uint64_t Log::LastIndex() const {
  if (auto i = unstable_.MaybeLastIndex()) return *i;
  return storage_->LastIndex();
}

Result<uint64_t> Log::Term(uint64_t i) const {
  uint64_t dummy = FirstIndex() - 1;
  if (i < dummy || i > LastIndex()) return uint64_t{0};
  if (auto t = unstable_.MaybeTerm(i)) return *t;
  auto t = storage_->Term(i);
  if (t.ok()) return t;
  if (t.status().code() == Code::kOutOfRange || t.status().code() == Code::kNotFound) return t;
  Fatal("storage term: " + t.status().ToString());
}

uint64_t Log::TermOrZero(uint64_t i) const {
  auto t = Term(i);
  return t.ok() ? t.value() : 0;
}

uint64_t Log::LastTerm() const {
  auto t = Term(LastIndex());
  if (!t.ok()) Fatal("unexpected error getting the last term: " + t.status().ToString());
  return t.value();
}

bool Log::MatchTerm(uint64_t i, uint64_t term) const {
  auto t = Term(i);
  return t.ok() && t.value() == term;
}

bool Log::IsUpToDate(uint64_t lasti, uint64_t term) const {
  uint64_t my_term = LastTerm();
  return term > my_term || (term == my_term && lasti >= LastIndex());
}

uint64_t Log::FindConflict(const std::vector<raftpb::Entry>& ents) const {
  for (const auto& e : ents) {
    if (!MatchTerm(e.index(), e.term())) return e.index();
  }
  return 0;
}

std::pair<uint64_t, uint64_t> Log::FindConflictByTerm(uint64_t index, uint64_t term) const {
  if (index > LastIndex()) return {index, 0};
  for (;; --index) {
    auto t = Term(index);
    if (!t.ok()) return {index, 0};
    if (t.value() <= term) return {index, t.value()};
    if (index == 0) return {0, 0};
  }
}

std::optional<uint64_t> Log::MaybeAppend(uint64_t index, uint64_t log_term, uint64_t committed,
                                         const std::vector<raftpb::Entry>& ents) {
  if (!MatchTerm(index, log_term)) return std::nullopt;
  uint64_t last_new = index + ents.size();
  uint64_t ci = FindConflict(ents);
  if (ci != 0) {
    if (ci <= committed_) {
      Fatal("entry " + std::to_string(ci) + " conflicts with committed entry (committed " +
            std::to_string(committed_) + ")");
    }
    std::vector<raftpb::Entry> tail(ents.begin() + static_cast<long>(ci - (index + 1)), ents.end());
    Append(tail);
  }
  CommitTo(std::min(committed, last_new));
  return last_new;
}

uint64_t Log::Append(const std::vector<raftpb::Entry>& ents) {
  if (ents.empty()) return LastIndex();
  if (ents.front().index() - 1 < committed_) {
    Fatal("appending at index " + std::to_string(ents.front().index()) +
          " would overwrite committed entries (committed " + std::to_string(committed_) + ")");
  }
  unstable_.TruncateAndAppend(ents);
  return LastIndex();
}

bool Log::HasNextCommittedEntries() const {
  uint64_t off = std::max(applied_ + 1, FirstIndex());
  return committed_ + 1 > off;
}

std::vector<raftpb::Entry> Log::NextCommittedEntries() const {
  uint64_t off = std::max(applied_ + 1, FirstIndex());
  if (committed_ + 1 <= off) return {};
  auto ents = Slice(off, committed_ + 1, max_next_size_);
  if (!ents.ok()) Fatal("unexpected error reading committed entries: " + ents.status().ToString());
  return std::move(ents).value();
}

Result<raftpb::Snapshot> Log::Snapshot() const {
  if (unstable_.snapshot) return *unstable_.snapshot;
  return storage_->Snapshot();
}

Result<std::vector<raftpb::Entry>> Log::Entries(uint64_t i, uint64_t max_size) const {
  if (i > LastIndex()) return std::vector<raftpb::Entry>();
  return Slice(i, LastIndex() + 1, max_size);
}

Result<std::vector<raftpb::Entry>> Log::Slice(uint64_t lo, uint64_t hi, uint64_t max_size) const {
  if (lo > hi) Fatal("invalid slice " + std::to_string(lo) + " > " + std::to_string(hi));
  if (lo < FirstIndex()) return ErrCompacted();
  if (hi > LastIndex() + 1) {
    Fatal("slice [" + std::to_string(lo) + "," + std::to_string(hi) + ") out of bound");
  }
  std::vector<raftpb::Entry> ents;
  if (lo == hi) return ents;
  if (lo < unstable_.offset) {
    auto stored = storage_->Entries(lo, std::min(hi, unstable_.offset), max_size);
    if (!stored.ok()) {
      if (stored.status().code() == Code::kOutOfRange) return stored.status();
      Fatal("entries [" + std::to_string(lo) + "," +
            std::to_string(std::min(hi, unstable_.offset)) +
            ") unavailable from storage: " + stored.status().ToString());
    }
    ents = std::move(stored).value();
    // The storage stopped early at the size limit: return what fits.
    if (ents.size() < std::min(hi, unstable_.offset) - lo) return ents;
  }
  if (hi > unstable_.offset) {
    auto u = unstable_.Slice(std::max(lo, unstable_.offset), hi);
    ents.insert(ents.end(), u.begin(), u.end());
  }
  LimitSize(ents, max_size);
  return ents;
}

void Log::CommitTo(uint64_t to) {
  if (committed_ >= to) return;  // never decrease
  if (LastIndex() < to) {
    Fatal("commit index " + std::to_string(to) + " is out of range [last index " +
          std::to_string(LastIndex()) + "]");
  }
  committed_ = to;
}

void Log::AppliedTo(uint64_t i) {
  if (i == 0) return;
  if (committed_ < i || i < applied_) {
    Fatal("applied index " + std::to_string(i) + " is out of range [prev applied " +
          std::to_string(applied_) + ", committed " + std::to_string(committed_) + "]");
  }
  applied_ = i;
}

bool Log::MaybeCommit(uint64_t max_index, uint64_t term) {
  if (max_index > committed_ && TermOrZero(max_index) == term) {
    CommitTo(max_index);
    return true;
  }
  return false;
}

void Log::Restore(const raftpb::Snapshot& s) {
  committed_ = s.metadata().index();
  unstable_.Restore(s);
}

}  // namespace etcdw::raft
