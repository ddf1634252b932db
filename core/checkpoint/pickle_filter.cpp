#include "checkpoint/pickle_filter.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_error.h"
#include "common/error.h"

namespace ddp::core {
namespace {

// The globals a torch.save file of tensors, containers, numbers and strings
// names (Python's weights_only allow-list, less what LibTorch cannot build).
bool allowed_global(const std::string& module, const std::string& name) {
  static const std::set<std::string> storages = {
      "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
      "ShortStorage", "CharStorage",   "ByteStorage", "BoolStorage"};
  if (module == "torch._utils") return name == "_rebuild_tensor_v2";
  if (module == "torch") return storages.count(name) != 0;
  if (module == "torch.jit._pickle")
    return name == "build_intlist" || name == "build_doublelist" || name == "build_boollist" ||
           name == "build_tensorlist" || name == "build_genericlist";
  return false;
}

}  // namespace

// The three rewrites: each empty collections.OrderedDict() (Python's
// state_dict, a tensor's backward hooks) becomes an empty dict: LibTorch
// builds OrderedDict as None, expecting one only for the hooks, so a
// state_dict would fail on its first item. And a BUILD (which only an
// OrderedDict's attributes can reach, every class being refused: a
// state_dict's _metadata) becomes an entry "__dict__" of the dict, holding
// those attributes (LibTorch's BUILD expects an object). A
// collections.Counter(dict) (MultiStepLR's milestones) becomes its dict. To
// know where that state begins, the walk keeps, for each item on the
// pickle's stack, where its opcodes begin in the output.
//
// Nesting: each value the pickle makes is an object with its depth (0 for a
// number or string, 1 for an empty container, one more than its deepest
// element otherwise). The memo and its recalls (GET) share objects, so a
// container's depth is known wherever it is recalled, and a recalled
// object is frozen: Python's and LibTorch's picklers finish a container
// before they recall it, so a change after a recall is a cycle (a list that
// holds itself) or a depth that would go uncounted.
std::string filter_pickle(const std::string& pkl, const std::string& name) {
  const auto* p = reinterpret_cast<const uint8_t*>(pkl.data());
  const size_t n = pkl.size();
  size_t i = 0;
  std::string out;
  out.reserve(n);
  auto need = [&](size_t k) {
    if (k > n - i) bad_checkpoint(name, "data.pkl ends inside an opcode");
  };
  auto fixed = [&](size_t k) -> uint64_t {
    need(k);
    uint64_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= static_cast<uint64_t>(p[i + b]) << (8 * b);
    i += k;
    return v;
  };
  auto line = [&]() {
    auto end = static_cast<const uint8_t*>(std::memchr(p + i, '\n', n - i));
    if (!end) bad_checkpoint(name, "data.pkl ends inside an opcode");
    std::string v(reinterpret_cast<const char*>(p + i), end - (p + i));
    i = static_cast<size_t>(end - p) + 1;
    return v;
  };
  struct Object {
    size_t depth;
    bool frozen;  // recalled from the memo: no longer changed
  };
  std::vector<Object> objects;  // at most one per opcode
  std::map<uint64_t, size_t> memo;  // memo key -> object
  uint64_t memo_end = 0;            // one past the largest memo key stored
  // The stack: where each item's opcodes begin in `out`, its object; marks flagged.
  struct Item {
    size_t start;
    bool mark;
    size_t object;
  };
  std::vector<Item> stack;
  auto deepest = [&](size_t depth) {
    if (depth > kMaxPickleNesting)
      bad_checkpoint(name, "data.pkl nests containers deeper than " + std::to_string(kMaxPickleNesting) +
                    " levels, which torch.save does not write");
    return depth;
  };
  auto push = [&](size_t start, size_t depth) {
    objects.push_back({deepest(depth), false});
    stack.push_back({start, false, objects.size() - 1});
  };
  // Pops k values: where the first begins, and the depth of the deepest.
  auto pop = [&](size_t k, size_t* depth = nullptr) {
    if (stack.size() < k) bad_checkpoint(name, "data.pkl pops more than it pushed");
    size_t start = stack.empty() || k == 0 ? out.size() : stack[stack.size() - k].start;
    size_t d = 0;
    for (size_t j = 0; j < k; ++j) {
      if (stack.back().mark) bad_checkpoint(name, "data.pkl uses a mark as a value");
      d = std::max(d, objects[stack.back().object].depth);
      stack.pop_back();
    }
    if (depth) *depth = d;
    return start;
  };
  auto pop_to_mark = [&](size_t* depth = nullptr) {
    size_t d = 0;
    while (!stack.empty() && !stack.back().mark) {
      d = std::max(d, objects[stack.back().object].depth);
      stack.pop_back();
    }
    if (stack.empty()) bad_checkpoint(name, "data.pkl has no mark where it needs one");
    size_t start = stack.back().start;
    stack.pop_back();
    if (depth) *depth = d;
    return start;
  };
  // The container an APPEND, SETITEM(S) or BUILD adds to (the stack's top,
  // after what it adds was popped) now holds something `depth` deep.
  auto add_to_top = [&](size_t depth) {
    if (stack.empty() || stack.back().mark) bad_checkpoint(name, "data.pkl adds to a container that is not there");
    Object& o = objects[stack.back().object];
    if (o.frozen)
      bad_checkpoint(name, "data.pkl changes a container after a reference to it was made (a container that holds itself?), "
                "which torch.save does not write");
    o.depth = deepest(std::max(o.depth, depth + 1));
  };
  std::set<uint64_t> od_memo;  // memo keys holding the OrderedDict class
  bool od = false;              // the OrderedDict class is on top of the stack, not emitted
  // collections.Counter(dict) (MultiStepLR's milestones) becomes the dict:
  // the class is not emitted, its one-tuple of arguments and the call
  // neither. Each pending call: the stack depth where the class would be,
  // and whether its arguments are complete.
  std::set<uint64_t> counter_memo;
  bool counter_class = false;  // the class was just pushed (a PUT may follow)
  std::vector<std::pair<size_t, bool>> counter_calls;
  while (i < n) {
    const size_t start = i, here = out.size();
    const uint8_t op = p[i++];
    bool emit = true;
    // The class OrderedDict may only be memoised, recalled, or called with no
    // arguments: EMPTY_TUPLE REDUCE, which becomes EMPTY_DICT.
    if (od && op != 'q' && op != 'r') {
      if (op != ')' || i >= n || p[i] != 'R')
        bad_checkpoint(name, "it holds an OrderedDict built from arguments, which libddp does not load");
      ++i;
      out.push_back('}');
      push(here, 1);
      od = false;
      continue;
    }
    const bool after_counter_class = counter_class;
    counter_class = false;
    auto counter = [&]() {
      counter_calls.push_back({stack.size(), false});
      counter_class = true;
      emit = false;
    };
    auto get = [&](uint64_t key) {
      if (counter_memo.count(key)) {
        counter();
      } else if (od_memo.count(key)) {
        od = true;
        emit = false;
      } else {
        auto it = memo.find(key);
        if (it == memo.end()) bad_checkpoint(name, "data.pkl recalls memo entry " + std::to_string(key) + ", which it never stored");
        objects[it->second].frozen = true;
        stack.push_back({here, false, it->second});
      }
    };
    auto put = [&](uint64_t key) {
      // LibTorch's unpickler sizes its memo table by the largest key: one
      // PUT of key 2^28 in a 300-byte file made it allocate 2.7 GB (found
      // by fuzzing). Python's pickler and LibTorch's number their entries
      // 0, 1, 2, ... in order.
      if (key > memo_end)
        bad_checkpoint(name, "data.pkl memoises under key " + std::to_string(key) + " where the next is " +
                      std::to_string(memo_end) + " (torch.save numbers its memo entries in order)");
      memo_end = std::max(memo_end, key + 1);
      if (after_counter_class) {
        counter_memo.insert(key);
        counter_class = true;
        emit = false;
      } else if (od) {
        od_memo.insert(key);
        emit = false;
      } else {
        if (stack.empty() || stack.back().mark) bad_checkpoint(name, "data.pkl memoises an empty stack or a mark");
        memo[key] = stack.back().object;
      }
    };
    size_t depth = 0;
    switch (op) {
      case '.':  // STOP
        out.push_back('.');
        return out;
      case 0x80: {  // PROTO
        uint64_t v = fixed(1);
        if (v != 2)
          bad_checkpoint(name, "pickle protocol " + std::to_string(v) + ": libddp reads protocol 2, torch.save's default");
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        std::string module = line();
        std::string cls = line();
        if (module == "collections" && cls == "OrderedDict") {
          od = true;
          emit = false;
          break;
        }
        if (module == "collections" && cls == "Counter") {
          counter();
          break;
        }
        if (!allowed_global(module, cls))
          bad_checkpoint(name, "it holds a pickled " + module + "." + cls +
                        ": only tensors, containers, numbers and strings are loaded, and nothing in the file is run");
        push(here, 0);
        break;
      }
      case 'h': get(fixed(1)); break;
      case 'j': get(fixed(4)); break;
      case 'q': put(fixed(1)); break;
      case 'r': put(fixed(4)); break;
      case '(': stack.push_back({here, true, 0}); break;  // MARK
      case 'N': case 0x88: case 0x89: push(here, 0); break;
      case ')': case ']': case '}': push(here, 1); break;
      case 'J': fixed(4); push(here, 0); break;
      case 'K': fixed(1); push(here, 0); break;
      case 'M': fixed(2); push(here, 0); break;
      case 'G': fixed(8); push(here, 0); break;
      case 'X': case 0x8c: case 'T': case 'U': case 'B': case 'C': case 0x8a: case 0x8b: {
        size_t width = (op == 0x8c || op == 'U' || op == 'C' || op == 0x8a) ? 1 : 4;
        uint64_t len = fixed(width);
        need(len);
        i += len;
        push(here, 0);
        break;
      }
      case 't': case 'l': case 'd': {  // TUPLE, LIST, DICT
        const size_t from = pop_to_mark(&depth);
        push(from, depth + 1);
        break;
      }
      case 0x85: {  // TUPLE1; a Counter's arguments stay the dict they hold
        if (!counter_calls.empty() && !counter_calls.back().second && stack.size() == counter_calls.back().first + 1) {
          counter_calls.back().second = true;
          emit = false;
          break;
        }
        const size_t from = pop(1, &depth);
        push(from, depth + 1);
        break;
      }
      case 0x86: case 0x87: {  // TUPLE2, TUPLE3
        const size_t from = pop(op == 0x86 ? 2 : 3, &depth);
        push(from, depth + 1);
        break;
      }
      case 'a': pop(1, &depth); add_to_top(depth); break;       // APPEND
      case 's': pop(2, &depth); add_to_top(depth); break;       // SETITEM
      case 'e': case 'u': pop_to_mark(&depth); add_to_top(depth); break;  // APPENDS, SETITEMS
      case 'R': case 0x81: {  // REDUCE, NEWOBJ; a Counter's call leaves its dict
        if (!counter_calls.empty() && stack.size() == counter_calls.back().first + 1) {
          if (!counter_calls.back().second || op != 'R')
            bad_checkpoint(name, "it holds a Counter built other than from a dict, which libddp does not load");
          counter_calls.pop_back();
          emit = false;
          break;
        }
        // What a call builds holds its arguments' contents (a tensor, a
        // list from torch.jit._pickle): as deep as the arguments' tuple.
        const size_t from = pop(2, &depth);
        push(from, depth);
        break;
      }
      case 'Q': {  // BINPERSID
        const size_t from = pop(1, &depth);
        push(from, depth);
        break;
      }
      case 'b': {  // BUILD: the attributes become the dict's entry "__dict__"
        size_t from = pop(1, &depth);
        add_to_top(depth);
        static const char key[] = "X\x08\x00\x00\x00__dict__";  // BINUNICODE "__dict__"
        out.insert(from, key, sizeof(key) - 1);
        out.push_back('s');  // SETITEM
        emit = false;
        break;
      }
      case 'i':
        bad_checkpoint(name, "it holds a pickled instance (INST), which libddp does not load");
      default:
        bad_checkpoint(name, "data.pkl has pickle opcode " + std::to_string(op) + ", which torch.save's protocol 2 does not write");
    }
    if (emit) out.append(pkl, start, i - start);
  }
  bad_checkpoint(name, "data.pkl has no STOP opcode");
}

}  // namespace ddp::core
