// Internal: the syntax tree of a parsed Jinja2 template (jinja_parse.cc builds it, jinja_render.cc walks it).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/prompt/value.h"

namespace strata::prompt::internal {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null entries = omitted)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..], kwargs); negated
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kNot,       // not args[0]
    kBinary,    // args[0] op args[1]: + - * / // % ** ~
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    kAnd,
    kOr,
    kCond,      // args[1] if args[0] else args[2] (args[2] may be null)
    kList,
    kTuple,
    kDict,      // args = k0, v0, k1, v1, ...
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;  // Name, attribute, filter or test name, binary operator.
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Comparison operators.
  bool negated = false;

  Expr() = default;
  Expr(const Expr&) = delete;  // Owns its subtree.
  Expr& operator=(const Expr&) = delete;
  // Destroys the subtree without recursion: a 20,000-term sum is a left-deep chain that a recursive
  // destructor would follow down the stack.
  ~Expr() {
    std::vector<ExprPtr> pending;
    auto take = [&pending](Expr& e) {
      for (ExprPtr& a : e.args) pending.push_back(std::move(a));
      for (auto& kv : e.kwargs) pending.push_back(std::move(kv.second));
      e.args.clear();
      e.kwargs.clear();
    };
    take(*this);
    while (!pending.empty()) {
      ExprPtr e = std::move(pending.back());
      pending.pop_back();
      if (e) take(*e);
    }  // `e` is destroyed here with no children left.
  }
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith };
  Kind kind;
  int line = 0;
  std::string text;                      // kText; kSet/kSetBlock: the name; kMacro: the name.
  ExprPtr expr;                          // kOutput, kSet value, kFor iterable, kFilterBlock filter chain.
  std::vector<std::string> targets;      // kFor / kSet unpacking targets; kSet attribute: {name, attr}.
  bool attribute_target = false;         // {% set ns.attr = ... %}.
  ExprPtr condition;                     // kFor: the inline `if` filter.
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: condition + body for if and each elif.
  Body body;                             // kFor, kSetBlock, kMacro, kFilterBlock, kWith, kCallBlock.
  Body else_body;                        // kIf, kFor.
  bool recursive = false;                // kFor.
  // kMacro: parameter names and defaults (null = required); kWith: names and values.
  std::vector<std::pair<std::string, ExprPtr>> params;
};

struct Tree {
  Body body;
};

}  // namespace strata::prompt::internal
