#include "djshard/io/record.h"

#include "djshard/io/json_text.h"

namespace djshard::io {

namespace {
bool HasEscape(std::string_view literal) { return literal.find('\\') != std::string_view::npos; }
}  // namespace

void Record::Assign(std::string_view line) {
  owned_.assign(line);
  AssignView(owned_);
}

void Record::AssignView(std::string_view line) {
  line_ = line;
  members_.clear();
  replacements_.clear();
  appended_.clear();
  modified_ = false;
  for (const JsonMember& m : SplitObject(line_)) {
    Member member;
    member.key = HasEscape(m.key_literal)
                     ? UnescapeJsonString(m.key_literal)
                     : std::string(m.key_literal.substr(1, m.key_literal.size() - 2));
    member.key_literal = m.key_literal;
    member.value = m.value;
    members_.push_back(std::move(member));
  }
}

Record::Member* Record::FindMember(std::string_view key) {
  for (Member& m : members_) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

const Record::Member* Record::FindMember(std::string_view key) const {
  for (const Member& m : members_) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

std::optional<std::string_view> Record::Find(std::string_view key) const {
  if (const Member* m = FindMember(key); m != nullptr && !m->removed) {
    if (m->replacement >= 0) return std::string_view(replacements_[m->replacement]);
    return m->value;
  }
  for (const auto& [k, v] : appended_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

void Record::Set(std::string_view key, std::string value) {
  modified_ = true;
  Member* m = FindMember(key);
  if (m != nullptr && m->removed) {
    // Moved to the end by SetLast: set it there.
    for (auto& [k, v] : appended_) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
  }
  if (m != nullptr) {
    m->removed = false;
    if (m->replacement >= 0) {
      replacements_[m->replacement] = std::move(value);
    } else {
      m->replacement = static_cast<int>(replacements_.size());
      replacements_.push_back(std::move(value));
    }
    return;
  }
  for (auto& [k, v] : appended_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  appended_.emplace_back(std::string(key), std::move(value));
}

void Record::Remove(std::string_view key) {
  if (Member* m = FindMember(key)) {
    modified_ = true;
    m->removed = true;
  }
  for (size_t i = 0; i < appended_.size(); ++i) {
    if (appended_[i].first == key) appended_.erase(appended_.begin() + i);
  }
}

void Record::SetLast(std::string_view key, std::string value) {
  modified_ = true;
  if (Member* m = FindMember(key)) m->removed = true;
  for (size_t i = 0; i < appended_.size(); ++i) {
    if (appended_[i].first == key)
      appended_.erase(appended_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  appended_.emplace_back(std::string(key), std::move(value));
}

void Record::Serialize(std::string* out) const {
  if (!modified_) {
    out->append(line_);
    return;
  }
  out->push_back('{');
  bool first = true;
  for (const Member& m : members_) {
    if (m.removed) continue;
    if (!first) out->push_back(',');
    first = false;
    out->append(m.key_literal);
    out->push_back(':');
    out->append(m.replacement >= 0 ? std::string_view(replacements_[m.replacement]) : m.value);
  }
  for (const auto& [k, v] : appended_) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, k);
    out->push_back(':');
    out->append(v);
  }
  out->push_back('}');
}

}  // namespace djshard::io
