// The restricted unpickler. It follows CPython's Lib/pickle.py for the
// opcodes it knows, but a global is never imported and nothing is called:
// REDUCE and NEWOBJ are interpreted for the few allowed globals only, and
// objects live in an arena addressed by index, so a pickle that makes a list
// contain itself costs nothing and leaks nothing.
#include "src/model/weights/state_dict_pickle.h"

#include <bit>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

#include "djshard/common/error.h"
#include "src/model/weights/formats.h"

namespace djshard::model::weights {

namespace {

enum class Kind {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor
};

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kGlobal:
      return "class or function";
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
  }
  return "object";
}

enum class Global { kOrderedDict, kRebuildTensorV2, kRebuildParameter, kStorageType };

struct Object {
  Kind kind = Kind::kNone;
  int64_t number = 0;         // kBool, kInt; index into storages (kStorage) or tensors (kTensor)
  std::string text;           // kString; the global's dotted name (kGlobal)
  std::vector<size_t> items;  // kTuple, kList; kDict: key, value, key, value, ...
  Global global = Global::kOrderedDict;   // kGlobal
  WeightDType dtype = WeightDType::kF32;  // kGlobal kStorageType
};

struct StorageType {
  const char* name;
  WeightDType dtype;
};

constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", WeightDType::kF32},     {"HalfStorage", WeightDType::kF16},
    {"BFloat16Storage", WeightDType::kBF16}, {"DoubleStorage", WeightDType::kF64},
    {"LongStorage", WeightDType::kI64},      {"IntStorage", WeightDType::kI32},
    {"ShortStorage", WeightDType::kI16},     {"CharStorage", WeightDType::kI8},
    {"ByteStorage", WeightDType::kU8},       {"BoolStorage", WeightDType::kBool},
};

constexpr size_t kMaxDims = 64;

class Unpickler {
 public:
  Unpickler(std::string_view pickle, const std::string& file) : pickle_(pickle), file_(file) {}

  PickledStateDict Run() {
    for (;;) {
      op_pos_ = pos_;
      const uint8_t op = static_cast<uint8_t>(Take(1)[0]);
      if (op == '.') return Result(Pop());
      Step(op);
    }
  }

 private:
  // Runs one opcode; a group below runs the opcodes it knows and answers
  // whether `op` was one of them.
  void Step(uint8_t op) {
    if (StepFrame(op) || StepScalar(op) || StepSequence(op) || StepDict(op) || StepMemo(op) ||
        StepObject(op)) {
      return;
    }
    static const char* kHex = "0123456789abcdef";
    Fail(std::string("opcode 0x") + kHex[op >> 4] + kHex[op & 15] +
         " is not one that torch.save writes");
  }

  // The protocol, frames and the stack's marks.
  bool StepFrame(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (const uint8_t v = static_cast<uint8_t>(Take(1)[0]); v < 2 || v > 5) {
          Fail("pickle protocol " + std::to_string(v) + " (torch.save writes 2)");
        }
        return true;
      case 0x95:  // FRAME: a length hint for buffered readers
        Take(8);
        return true;
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return true;
      case '0':  // POP
        Pop();
        return true;
      case '1':  // POP_MARK
        PopToMark();
        return true;
      default:
        return false;
    }
  }

  // None, booleans, integers, floats and strings.
  bool StepScalar(uint8_t op) {
    switch (op) {
      case 'N':
        Push(New(Kind::kNone));
        return true;
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
        PushInt(Kind::kBool, op == 0x88);
        return true;
      case 'J':  // BININT
        PushInt(Kind::kInt, Read<int32_t>());
        return true;
      case 'K':  // BININT1
        PushInt(Kind::kInt, Read<uint8_t>());
        return true;
      case 'M':  // BININT2
        PushInt(Kind::kInt, Read<uint16_t>());
        return true;
      case 0x8a:  // LONG1
        PushInt(Kind::kInt, ReadLong(Read<uint8_t>()));
        return true;
      case 'G':  // BINFLOAT: big-endian; the value matters to no tensor
        Take(8);
        Push(New(Kind::kFloat));
        return true;
      case 'X':  // BINUNICODE
        PushString(Take(Read<uint32_t>()));
        return true;
      case 0x8c:  // SHORT_BINUNICODE
        PushString(Take(Read<uint8_t>()));
        return true;
      case 0x8d:  // BINUNICODE8
        PushString(Take(Read<uint64_t>()));
        return true;
      default:
        return false;
    }
  }

  // Tuples and lists.
  bool StepSequence(uint8_t op) {
    switch (op) {
      case ')':  // EMPTY_TUPLE
        Push(New(Kind::kTuple));
        return true;
      case 't':  // TUPLE
        PushItems(Kind::kTuple, PopToMark());
        return true;
      case 0x85:  // TUPLE1
      case 0x86:  // TUPLE2
      case 0x87:  // TUPLE3
        PushItems(Kind::kTuple, PopN(op - 0x84));
        return true;
      case ']':  // EMPTY_LIST
        Push(New(Kind::kList));
        return true;
      case 'l':  // LIST
        PushItems(Kind::kList, PopToMark());
        return true;
      case 'a': {  // APPEND
        const size_t v = Pop();
        Mutable(Top(), Kind::kList, "APPEND").items.push_back(v);
        return true;
      }
      case 'e': {  // APPENDS
        const std::vector<size_t> vs = PopToMark();
        std::vector<size_t>& items = Mutable(Top(), Kind::kList, "APPENDS").items;
        items.insert(items.end(), vs.begin(), vs.end());
        return true;
      }
      default:
        return false;
    }
  }

  bool StepDict(uint8_t op) {
    switch (op) {
      case '}':  // EMPTY_DICT
        Push(New(Kind::kDict));
        return true;
      case 'd': {  // DICT
        std::vector<size_t> kvs = PopToMark();
        if (kvs.size() % 2 != 0) Fail("DICT with an odd number of items");
        PushItems(Kind::kDict, std::move(kvs));
        return true;
      }
      case 's': {  // SETITEM
        const size_t v = Pop();
        const size_t k = Pop();
        std::vector<size_t>& items = Mutable(Top(), Kind::kDict, "SETITEM").items;
        items.push_back(k);
        items.push_back(v);
        return true;
      }
      case 'u': {  // SETITEMS
        const std::vector<size_t> kvs = PopToMark();
        if (kvs.size() % 2 != 0) Fail("SETITEMS with an odd number of items");
        std::vector<size_t>& items = Mutable(Top(), Kind::kDict, "SETITEMS").items;
        items.insert(items.end(), kvs.begin(), kvs.end());
        return true;
      }
      default:
        return false;
    }
  }

  bool StepMemo(uint8_t op) {
    switch (op) {
      case 'q':  // BINPUT
        memo_[Read<uint8_t>()] = Top();
        return true;
      case 'r':  // LONG_BINPUT
        memo_[Read<uint32_t>()] = Top();
        return true;
      case 0x94: {  // MEMOIZE
        const size_t top = Top();
        memo_[static_cast<uint32_t>(memo_.size())] = top;
        return true;
      }
      case 'h':  // BINGET
        Push(Memo(Read<uint8_t>()));
        return true;
      case 'j':  // LONG_BINGET
        Push(Memo(Read<uint32_t>()));
        return true;
      default:
        return false;
    }
  }

  // Globals, calls of the allowed ones, and persistent ids (storages).
  bool StepObject(uint8_t op) {
    switch (op) {
      case 'c': {  // GLOBAL
        const std::string_view module = ReadLine();
        const std::string_view name = ReadLine();
        Push(Resolve(module, name));
        return true;
      }
      case 0x93:  // STACK_GLOBAL
        StackGlobal();
        return true;
      case 'R': {  // REDUCE
        const size_t args = Pop();
        const size_t callable = Pop();
        Push(Call(callable, args));
        return true;
      }
      case 0x81:  // NEWOBJ: cls.__new__(cls, *args)
        NewObject();
        return true;
      case 'b':  // BUILD: the attributes of state_dict()'s OrderedDict (_metadata)
        SetState();
        return true;
      case 'Q':  // BINPERSID
        Push(PersistentLoad(Pop()));
        return true;
      default:
        return false;
    }
  }

  void StackGlobal() {
    const size_t name = Pop();
    const size_t module = Pop();
    if (At(module).kind != Kind::kString || At(name).kind != Kind::kString) {
      Fail("STACK_GLOBAL needs two strings");
    }
    Push(Resolve(At(module).text, At(name).text));
  }

  void NewObject() {
    const size_t args = Pop();
    const size_t cls = Pop();
    if (At(cls).kind != Kind::kGlobal || At(cls).global != Global::kOrderedDict ||
        !Tuple(args, "NEWOBJ").empty()) {
      Fail("NEWOBJ makes something other than an empty collections.OrderedDict");
    }
    Push(New(Kind::kDict));
  }

  void SetState() {
    Pop();
    if (const Kind kind = At(Top()).kind; kind != Kind::kDict) {
      Fail(std::string("BUILD sets the state of a ") + KindName(kind) +
           " (only a state dict's OrderedDict has one)");
    }
  }

  // collections.OrderedDict(), _rebuild_tensor_v2(...) or _rebuild_parameter(...).
  size_t Call(size_t callable, size_t args_index) {
    const Object& f = At(callable);
    if (f.kind != Kind::kGlobal) Fail(std::string("REDUCE calls a ") + KindName(f.kind));
    const std::vector<size_t>& args = Tuple(args_index, "REDUCE");
    switch (f.global) {
      case Global::kOrderedDict:
        if (!args.empty()) Fail("collections.OrderedDict is called with arguments");
        return New(Kind::kDict);
      case Global::kRebuildTensorV2:
        return RebuildTensor(args);
      case Global::kRebuildParameter:
        // _rebuild_parameter(data, requires_grad, backward_hooks): the data.
        if (args.size() != 3 || At(args[0]).kind != Kind::kTensor) {
          Fail("torch._utils._rebuild_parameter needs (tensor, requires_grad, hooks)");
        }
        return args[0];
      case Global::kStorageType:
        break;
    }
    Fail(f.text + " is called; a storage type only names the dtype of a persistent id");
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  // backward_hooks[, metadata]).
  size_t RebuildTensor(const std::vector<size_t>& args) {
    if (args.size() != 6 && args.size() != 7) {
      Fail("torch._utils._rebuild_tensor_v2 with " + std::to_string(args.size()) +
           " arguments (expected 6 or 7)");
    }
    if (At(args[0]).kind != Kind::kStorage) {
      Fail("torch._utils._rebuild_tensor_v2 of a " + std::string(KindName(At(args[0]).kind)) +
           ", not a storage");
    }
    PickledTensor t;
    t.storage = static_cast<size_t>(At(args[0]).number);
    t.offset = static_cast<uint64_t>(NonNegative(args[1], "storage offset"));
    for (const size_t d : Tuple(args[2], "tensor size")) t.size.push_back(NonNegative(d, "size"));
    for (const size_t d : Tuple(args[3], "tensor stride")) {
      t.stride.push_back(NonNegative(d, "stride"));
    }
    if (t.size.size() != t.stride.size()) Fail("a tensor's size and stride differ in length");
    if (t.size.size() > kMaxDims) Fail("a tensor with more than 64 dimensions");
    tensors_.push_back(std::move(t));
    return NewInt(Kind::kTensor, static_cast<int64_t>(tensors_.size() - 1));
  }

  // ('storage', torch.<T>Storage, key, location, numel).
  size_t PersistentLoad(size_t pid_index) {
    const std::vector<size_t>& pid = Tuple(pid_index, "persistent id");
    if (pid.size() != 5 || At(pid[0]).kind != Kind::kString || At(pid[0]).text != "storage" ||
        At(pid[1]).kind != Kind::kGlobal || At(pid[1]).global != Global::kStorageType ||
        At(pid[2]).kind != Kind::kString) {
      Fail("a persistent id that is not ('storage', torch.<T>Storage, key, location, numel)");
    }
    const WeightDType dtype = At(pid[1]).dtype;
    const std::string& key = At(pid[2]).text;
    const uint64_t numel = static_cast<uint64_t>(NonNegative(pid[4], "storage size"));
    auto [it, added] = storage_index_.try_emplace({key, static_cast<int>(dtype)}, storages_.size());
    if (added) {
      storages_.push_back({key, dtype, numel});
    } else if (storages_[it->second].numel != numel) {
      Fail("storage " + key + " is described with two sizes");
    }
    return NewInt(Kind::kStorage, static_cast<int64_t>(it->second));
  }

  size_t Resolve(std::string_view module, std::string_view name) {
    Object g;
    g.kind = Kind::kGlobal;
    // Shortened: the names come from the file, and only go into messages.
    g.text = std::string(module.substr(0, 100)) + "." + std::string(name.substr(0, 100));
    if (module == "collections" && name == "OrderedDict") {
      g.global = Global::kOrderedDict;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      g.global = Global::kRebuildTensorV2;
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      g.global = Global::kRebuildParameter;
    } else {
      bool found = false;
      for (const StorageType& s : kStorageTypes) {
        if (module == "torch" && name == s.name) {
          g.global = Global::kStorageType;
          g.dtype = s.dtype;
          found = true;
        }
      }
      if (!found) {
        throw Error(file_, 0,
                    "data.pkl references the global " + g.text +
                        ", which djshard refuses to load: a model file never runs code",
                    "a state dict needs only collections.OrderedDict, "
                    "torch._utils._rebuild_tensor_v2 and torch.*Storage; convert the weights to "
                    "safetensors where you trust the file");
      }
    }
    objects_.push_back(std::move(g));
    return objects_.size() - 1;
  }

  PickledStateDict Result(size_t top) {
    const Object& dict = At(top);
    if (dict.kind != Kind::kDict) {
      throw Error(
          file_, 0,
          std::string("data.pkl holds a ") + KindName(dict.kind) + ", not a dict of tensors",
          "djshard reads state dicts, as model.state_dict() returns them");
    }
    PickledStateDict out;
    std::unordered_map<std::string, size_t> seen;
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const Object& key = At(dict.items[i]);
      const Object& value = At(dict.items[i + 1]);
      if (key.kind != Kind::kString) {
        Fail(std::string("a dict key is a ") + KindName(key.kind) + ", not a tensor name");
      }
      if (value.kind == Kind::kDict) {
        throw Error(file_, 0,
                    "data.pkl: entry '" + key.text +
                        "' is a nested dict, not a tensor: the file is a checkpoint, not a "
                        "state dict",
                    "save model.state_dict() itself, e.g. torch.save(checkpoint['" + key.text +
                        "'], 'pytorch_model.bin')");
      }
      if (value.kind != Kind::kTensor) {
        throw Error(
            file_, 0,
            "data.pkl: entry '" + key.text + "' is a " + KindName(value.kind) + ", not a tensor",
            "djshard reads state dicts of tensors only");
      }
      const size_t tensor = static_cast<size_t>(value.number);
      auto [it, added] = seen.try_emplace(key.text, out.entries.size());
      if (added) {
        out.entries.emplace_back(key.text, tensor);
      } else {
        out.entries[it->second].second = tensor;
      }
    }
    out.storages = std::move(storages_);
    out.tensors = std::move(tensors_);
    return out;
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(file_, 0, "data.pkl: byte " + std::to_string(op_pos_) + ": " + what,
                "the file is damaged or is not a torch.save state dict");
  }

  std::string_view Take(uint64_t n) {
    if (n > pickle_.size() - pos_) Fail("the pickle ends early (no STOP)");
    const std::string_view v = pickle_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  template <typename T>
  T Read() {
    return LoadLittleEndian<T>(Take(sizeof(T)).data());
  }
  std::string_view ReadLine() {
    const size_t end = pickle_.find('\n', pos_);
    if (end == std::string_view::npos) Fail("the pickle ends early (no STOP)");
    const std::string_view line = pickle_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return line;
  }
  // A little-endian two's complement integer of n bytes (LONG1).
  int64_t ReadLong(uint8_t n) {
    if (n > 8) Fail("an integer of more than 64 bits");
    const std::string_view b = Take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(b[i])} << (8 * i);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(v);
  }

  size_t New(Kind kind) {
    objects_.emplace_back();
    objects_.back().kind = kind;
    return objects_.size() - 1;
  }
  size_t NewInt(Kind kind, int64_t v) {
    const size_t i = New(kind);
    objects_[i].number = v;
    return i;
  }
  void PushInt(Kind kind, int64_t v) { Push(NewInt(kind, v)); }
  void PushString(std::string_view s) {
    const size_t i = New(Kind::kString);
    objects_[i].text = std::string(s);
    Push(i);
  }
  void PushItems(Kind kind, std::vector<size_t> items) {
    const size_t i = New(kind);
    objects_[i].items = std::move(items);
    Push(i);
  }

  const Object& At(size_t i) const { return objects_[i]; }
  Object& Mutable(size_t i, Kind kind, const char* op) {
    if (objects_[i].kind != kind) {
      Fail(std::string(op) + " on a " + KindName(objects_[i].kind) + ", not a " + KindName(kind));
    }
    return objects_[i];
  }
  const std::vector<size_t>& Tuple(size_t i, const char* what) const {
    if (At(i).kind != Kind::kTuple) {
      Fail(std::string(what) + " is a " + KindName(At(i).kind) + ", not a tuple");
    }
    return At(i).items;
  }
  int64_t NonNegative(size_t i, const char* what) const {
    if (At(i).kind != Kind::kInt || At(i).number < 0) {
      Fail(std::string("a tensor's ") + what + " is not a non-negative integer");
    }
    return At(i).number;
  }
  size_t Memo(uint32_t key) const {
    const auto it = memo_.find(key);
    if (it == memo_.end()) Fail("memo entry " + std::to_string(key) + " was never stored");
    return it->second;
  }

  // The stack above the last MARK, as CPython's metastack sees it.
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void Push(size_t i) { stack_.push_back(i); }
  size_t Top() const {
    if (stack_.size() <= Floor()) Fail("stack underflow");
    return stack_.back();
  }
  size_t Pop() {
    const size_t top = Top();
    stack_.pop_back();
    return top;
  }
  std::vector<size_t> PopN(size_t n) {
    if (stack_.size() - Floor() < n) Fail("stack underflow");
    std::vector<size_t> items(stack_.end() - static_cast<ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return items;
  }
  std::vector<size_t> PopToMark() {
    if (marks_.empty()) Fail("no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<size_t> items(stack_.begin() + static_cast<ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  std::string_view pickle_;
  const std::string& file_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;           // where the opcode being run starts, for errors
  std::deque<Object> objects_;  // the arena; references stay valid as it grows
  std::vector<size_t> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint32_t, size_t> memo_;
  std::vector<PickledStorage> storages_;
  std::map<std::pair<std::string, int>, size_t> storage_index_;  // (key, dtype) -> storages_
  std::vector<PickledTensor> tensors_;
};

}  // namespace

PickledStateDict UnpickleStateDict(std::string_view pickle, const std::string& file) {
  return Unpickler(pickle, file).Run();
}

}  // namespace djshard::model::weights
