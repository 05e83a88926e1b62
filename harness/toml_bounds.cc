#include "harness/toml_bounds.h"

#include <vector>

namespace framegate {
namespace {

// "<source>:<line>:<column>" of text[at].
std::string PlaceOf(const std::string& text, size_t at, const std::string& source) {
  int line = 1;
  size_t line_begin = 0;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_begin = i + 1;
    }
  }
  return source + ":" + std::to_string(line) + ":" + std::to_string(at - line_begin + 1);
}

// The index of the last character of the string that opens at text[at] (a quote: basic,
// literal, or either multi-line); an unterminated one ends before its newline (single
// line) or at the end of the text. toml++ reports what is wrong with it.
size_t StringEnd(const std::string& text, size_t at) {
  const char quote = text[at];
  const std::string triple(3, quote);
  const bool multi_line = text.compare(at, 3, triple) == 0;
  for (size_t i = at + (multi_line ? 3 : 1); i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (multi_line && text.compare(i, 3, triple) == 0) {
      i += 2;
      for (int extra = 0; extra < 2 && i + 1 < text.size() && text[i + 1] == quote; ++extra) ++i;
      return i;
    } else if (!multi_line && text[i] == quote) {
      return i;
    } else if (!multi_line && text[i] == '\n') {
      return i - 1;
    }
  }
  return text.size() - 1;
}

size_t LineEnd(const std::string& text, size_t at) {
  const size_t newline = text.find('\n', at);
  return newline == std::string::npos ? text.size() - 1 : newline - 1;
}

// The depth scan of CheckTomlBounds: every table, dotted key segment, array and inline
// table is one level; the level of a value is that of its container plus its key's
// segments.
class TomlDepthScan {
 public:
  TomlDepthScan(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  Status Run() {
    for (i_ = 0; i_ < text_.size(); ++i_) {
      const char c = text_[i_];
      if (c == '\n') {
        if (open_.empty()) {
          expect_ = Expect::kKey;
          key_depth_ = -1;
          line_start_ = true;
        }
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') continue;
      if (c == '#') {
        i_ = LineEnd(text_, i_);
        continue;
      }
      Status status = line_start_ && open_.empty() && c == '[' ? Header() : Token(c);
      if (!status.ok()) return status;
      line_start_ = false;
    }
    return Status::Ok();
  }

 private:
  enum class Expect { kKey, kValue, kAfterValue };
  struct Open {
    char bracket;  // '[' or '{'
    int depth;     // the level of the array or inline table itself
  };

  Status TooDeep() const {
    return Status::InvalidInput(PlaceOf(text_, i_, source_) + ": nested deeper than " +
                                std::to_string(kMaxTomlDepth) +
                                " levels (tables, dotted keys, arrays and inline tables together)");
  }

  // "[a.b.c]" or "[[a.b.c]]" at the start of a line; the rest of the line is not looked at.
  Status Header() {
    const bool array_of_tables = i_ + 1 < text_.size() && text_[i_ + 1] == '[';
    table_depth_ = array_of_tables ? 2 : 1;
    for (++i_; i_ < text_.size() && text_[i_] != ']' && text_[i_] != '\n'; ++i_) {
      if (text_[i_] == '"' || text_[i_] == '\'') i_ = StringEnd(text_, i_);
      if (text_[i_] == '.' && ++table_depth_ > kMaxTomlDepth) return TooDeep();
    }
    expect_ = Expect::kAfterValue;
    return Status::Ok();
  }

  Status Token(char c) {
    switch (expect_) {
      case Expect::kKey:
        return KeyToken(c);
      case Expect::kValue:
        return ValueToken(c);
      case Expect::kAfterValue:
        AfterValueToken(c);
        return Status::Ok();
    }
    return Status::Ok();
  }

  Status KeyToken(char c) {
    if (c == '}' && !open_.empty()) {  // "{}"
      open_.pop_back();
      expect_ = Expect::kAfterValue;
      return Status::Ok();
    }
    if (key_depth_ < 0) {
      key_depth_ = (open_.empty() ? table_depth_ : open_.back().depth) + 1;
      if (key_depth_ > kMaxTomlDepth) return TooDeep();
    }
    if (c == '"' || c == '\'') {
      i_ = StringEnd(text_, i_);
    } else if (c == '.') {
      if (++key_depth_ > kMaxTomlDepth) return TooDeep();
    } else if (c == '=') {
      value_depth_ = key_depth_;
      key_depth_ = -1;
      expect_ = Expect::kValue;
    }
    return Status::Ok();
  }

  Status ValueToken(char c) {
    if (c == '{') {
      open_.push_back({'{', value_depth_});
      expect_ = Expect::kKey;
      key_depth_ = -1;
    } else if (c == '[') {
      open_.push_back({'[', value_depth_});
      if (++value_depth_ > kMaxTomlDepth) return TooDeep();
    } else if (c == ']' && !open_.empty()) {  // "[]" or a trailing comma
      open_.pop_back();
      expect_ = Expect::kAfterValue;
    } else {
      if (c == '"' || c == '\'') i_ = StringEnd(text_, i_);
      expect_ = Expect::kAfterValue;
    }
    return Status::Ok();
  }

  void AfterValueToken(char c) {
    if (c == '"' || c == '\'') {
      i_ = StringEnd(text_, i_);
    } else if ((c == ']' || c == '}') && !open_.empty()) {
      open_.pop_back();
    } else if (c == ',' && !open_.empty()) {
      if (open_.back().bracket == '[') {
        expect_ = Expect::kValue;
        value_depth_ = open_.back().depth + 1;
      } else {
        expect_ = Expect::kKey;
        key_depth_ = -1;
      }
    }
  }

  const std::string& text_;
  const std::string& source_;
  size_t i_ = 0;
  std::vector<Open> open_;
  int table_depth_ = 0;  // the level of the last [header]'s table
  int key_depth_ = -1;   // the level of the key being read, -1 before its first character
  int value_depth_ = 0;  // the level of the value expected next
  Expect expect_ = Expect::kKey;
  bool line_start_ = true;
};

}  // namespace

Status CheckTomlBounds(const std::string& text, const std::string& source) {
  if (text.size() > kMaxTomlBytes) {
    return Status::InvalidInput(source + ":1:1: " + std::to_string(text.size()) + " bytes, more than the " +
                                std::to_string(kMaxTomlBytes >> 20) + " MiB a TOML file may have");
  }
  return TomlDepthScan(text, source).Run();
}

}  // namespace framegate
