#!/usr/bin/env python3
# Generator: every command-line option accepted by Megatron-LM's argument parser.
#
# Reference commit: NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553
#   (megatron/training/arguments.py: parse_args -> add_megatron_arguments -> _add_*_args).
#
# Method (purely static, Python `ast`; no torch / no import of megatron):
#   1. Parse megatron/training/arguments.py; starting at parse_args, follow calls to
#      module-level functions of that file (call graph), so every _add_*_args helper
#      reached from add_megatron_arguments is included.  extra_args_provider hooks are not
#      part of the parser and are not included.
#   2. Kind (1): every `<x>.add_argument('--a', '--b', ...)` call in those functions;
#      all string positional arguments are option strings (aliases included).  With
#      action=argparse.BooleanOptionalAction argparse also registers "--no-<a>" for each
#      "--<a>", so those negated forms are emitted too.
#   3. Kind (2): every `ArgumentGroupFactory(Config, exclude=[...])` call in those
#      functions.  `Config` is resolved through the import statements (module-level or
#      function-local, absolute or relative, following package __init__ re-exports) to
#      its ClassDef; dataclass fields are collected like dataclasses.fields() does:
#      base dataclasses first (TransformerConfig <- ModelParallelConfig), a redefinition
#      in a subclass replaces the inherited field in place, ClassVar/unannotated names
#      are not fields.  `exclude` (a literal list, or a name bound to one in the same
#      function) is applied, and fields with field(init=False) are skipped, as
#      ArgumentGroupFactory.build_group does.  Names are then produced exactly as
#      megatron/training/argument_utils.py does:
#        * default name: "--" + field_name.replace("_", "-")   (_format_arg_name)
#        * a field whose inferred type is bool (bool, Optional[bool], bool | None, ...)
#          becomes store_true if `default == False`, otherwise store_false; store_false
#          fields get ["--no-<name>", "--disable-<name>"] (prefix "no"/"disable").
#          (default None, or a default_factory, therefore gives the no/disable pair.)
#        * field(metadata={"argparse_meta": {"arg_names": [...]}}) overrides the names.
#      Fields whose type the factory cannot infer and that have no argparse_meta, and
#      required fields (no default), would make the real parser raise; they are reported
#      on stderr (none exist at the reference commit).
#   4. Options of the conditional `kitchen` group (_add_kitchen_quantization_arguments,
#      added only when megatron.core.extensions.kitchen imports with HAVE_KITCHEN) are
#      included; pass --no-conditional to leave them out.
#   5. Duplicate option strings (which argparse would reject) are reported on stderr.
#
# Usage:
#   megatron_args.py [--checkout DIR | --git-dir DIR [--commit SHA]] [--no-conditional]
# Prints one option string per line, sorted.

import argparse
import ast
import os
import subprocess
import sys

DEFAULT_GIT_DIR = "/work/.mirror/NVIDIA+Megatron-LM/repo"
DEFAULT_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
ARGS_FILE = "megatron/training/arguments.py"
# Functions whose add_argument calls only happen under a runtime condition.
CONDITIONAL_FUNCS = {"_add_kitchen_quantization_arguments"}


class Reader:
    """Reads repository files from a checkout directory or a bare git dir at a commit."""

    def __init__(self, checkout=None, git_dir=None, commit=None):
        self.checkout, self.git_dir, self.commit = checkout, git_dir, commit
        self._cache = {}

    def read(self, path):
        if path in self._cache:
            return self._cache[path]
        text = None
        if self.checkout:
            full = os.path.join(self.checkout, path)
            if os.path.isfile(full):
                with open(full, encoding="utf-8") as fh:
                    text = fh.read()
        else:
            r = subprocess.run(["git", "-C", self.git_dir, "show", f"{self.commit}:{path}"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                text = r.stdout
        self._cache[path] = text
        return text


def warn(msg):
    print("WARNING: " + msg, file=sys.stderr)


# ---------------------------------------------------------------- module resolution

class Module:
    def __init__(self, reader, modname):
        self.name = modname
        self.reader = reader
        self.is_pkg = False
        base = modname.replace(".", "/")
        self.path = base + ".py"
        src = reader.read(self.path)
        if src is None:
            self.path = base + "/__init__.py"
            src = reader.read(self.path)
            self.is_pkg = True
        if src is None:
            raise FileNotFoundError(modname)
        self.tree = ast.parse(src)

    def resolve_relative(self, level, module):
        if level == 0:
            return module
        parts = self.name.split(".")
        if not self.is_pkg:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([module] if module else []))


_MODULES = {}


def load_module(reader, modname):
    if modname not in _MODULES:
        _MODULES[modname] = Module(reader, modname)
    return _MODULES[modname]


def import_map(mod, stmts):
    """name -> (module, original name) from ImportFrom statements in stmts."""
    m = {}
    for st in stmts:
        if isinstance(st, ast.ImportFrom):
            src = mod.resolve_relative(st.level, st.module)
            for a in st.names:
                m[a.asname or a.name] = (src, a.name)
    return m


def find_class(reader, modname, clsname, depth=0):
    """Return (Module, ClassDef) for clsname defined in / re-exported by modname."""
    if depth > 10:
        raise RecursionError(clsname)
    mod = load_module(reader, modname)
    for st in mod.tree.body:
        if isinstance(st, ast.ClassDef) and st.name == clsname:
            return mod, st
    imp = import_map(mod, [n for n in ast.walk(mod.tree) if isinstance(n, ast.ImportFrom)])
    if clsname in imp:
        src, orig = imp[clsname]
        return find_class(reader, src, orig, depth + 1)
    raise LookupError(f"{clsname} not found in {modname}")


def is_dataclass_def(cls):
    for d in cls.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if (isinstance(f, ast.Name) and f.id == "dataclass") or (
                isinstance(f, ast.Attribute) and f.attr == "dataclass"):
            return True
    return False


def class_fields(reader, mod, cls):
    """Ordered dict name -> (AnnAssign node, Module) as dataclasses.fields() would order them."""
    fields = {}
    if len(cls.bases) > 1:
        raise NotImplementedError(f"multiple inheritance in {cls.name}")
    for b in cls.bases:
        bname = b.id if isinstance(b, ast.Name) else b.attr
        imp = import_map(mod, [n for n in ast.walk(mod.tree) if isinstance(n, ast.ImportFrom)])
        if any(isinstance(s, ast.ClassDef) and s.name == bname for s in mod.tree.body):
            bmod, bcls = find_class(reader, mod.name, bname)
        elif bname in imp:
            bmod, bcls = find_class(reader, *imp[bname])
        else:
            raise LookupError(f"base {bname} of {cls.name}")
        fields.update(class_fields(reader, bmod, bcls))
    if not is_dataclass_def(cls):
        return fields  # annotations of a non-dataclass base are not fields
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            ann = ast.unparse(st.annotation)
            if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")):
                continue
            if ann in ("KW_ONLY", "dataclasses.KW_ONLY"):
                continue
            fields[st.target.id] = (st, mod)  # redefinition keeps the original position
    return fields


# ---------------------------------------------------------------- factory emulation

_MISSING = object()


def field_call(node):
    v = node.value
    if isinstance(v, ast.Call):
        f = v.func
        if (isinstance(f, ast.Name) and f.id == "field") or (
                isinstance(f, ast.Attribute) and f.attr == "field"):
            return v
    return None


def field_props(node):
    """(default_kind, default_node, init, argparse_meta dict-node or None)."""
    if node.value is None:
        return "missing", None, True, None
    fc = field_call(node)
    if fc is None:
        return "value", node.value, True, None
    kw = {k.arg: k.value for k in fc.keywords}
    init = True
    if "init" in kw:
        init = ast.literal_eval(kw["init"])
    meta = None
    if "metadata" in kw and isinstance(kw["metadata"], ast.Dict):
        for k, v in zip(kw["metadata"].keys, kw["metadata"].values):
            if isinstance(k, ast.Constant) and k.value == "argparse_meta":
                meta = v
    elif "metadata" in kw:
        warn(f"non-literal metadata for {node.target.id}: {ast.unparse(kw['metadata'])}")
    if "default" in kw:
        return "value", kw["default"], init, meta
    if "default_factory" in kw:
        return "factory", kw["default_factory"], init, meta
    return "missing", None, init, meta


class TypeInferenceError(Exception):
    pass


def _union_members(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_members(node.left) + _union_members(node.right)
    return [node]


def _is_none(node):
    return (isinstance(node, ast.Constant) and node.value is None) or (
        isinstance(node, ast.Name) and node.id == "NoneType")


def _tail(node):
    return node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else None)


def extract_type(node):
    """Mimic ArgumentGroupFactory._extract_type; returns the 'type' as a string tag."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        members = _union_members(node)
        if _is_none(members[1]):
            return extract_type(members[0])
        raise TypeInferenceError("Unions not supported: " + ast.unparse(node))
    if isinstance(node, ast.Subscript):
        origin = _tail(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if origin == "Optional":
            return extract_type(args[0])
        if origin == "Union":
            if len(args) > 1 and _is_none(args[1]):
                return extract_type(args[0])
            raise TypeInferenceError("Unions not supported: " + ast.unparse(node))
        if origin in ("list", "List"):
            if len(args) == 1:
                t = extract_type(args[0])
                if t == "bool":
                    raise TypeInferenceError("list[bool] would give store_true with nargs")
                return t
            raise TypeInferenceError("Multi-type list: " + ast.unparse(node))
        if origin == "Literal":
            kinds = {type(a.value).__name__ for a in args if isinstance(a, ast.Constant)}
            if len(kinds) != 1:
                raise TypeInferenceError("mixed Literal: " + ast.unparse(node))
            return kinds.pop()
        raise TypeInferenceError("Unsupported type: " + ast.unparse(node))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        raise TypeInferenceError("string annotation: " + node.value)
    name = _tail(node)
    if name in ("Callable", "Tuple", "Dict", "Sequence", "ContextManager"):
        raise TypeInferenceError("Unsupported type: " + ast.unparse(node))
    return name or ast.unparse(node)


def format_arg_name(name, prefix=None):
    if prefix:
        name = prefix + "_" + name
    return "--" + name.replace("_", "-")


def factory_option_names(reader, mod, cls, exclude, label):
    out = []
    for fname, (node, fmod) in class_fields(reader, mod, cls).items():
        dkind, dnode, init, meta = field_props(node)
        if fname in exclude or init is False:
            continue
        where = f"{label}.{fname} ({fmod.path}:{node.lineno})"
        if dkind == "missing":
            warn(f"required field would crash the factory: {where}")
        names = [format_arg_name(fname)]
        try:
            t = extract_type(node.annotation)
            if t == "bool":
                if dkind == "value":
                    try:
                        dval = ast.literal_eval(dnode)
                    except ValueError:
                        warn(f"non-literal bool default for {where}: {ast.unparse(dnode)};"
                             " assuming store_false")
                        dval = _MISSING
                else:
                    dval = _MISSING  # default_factory / MISSING: never == False
                store_true = dval is not _MISSING and dval == False  # noqa: E712
                if not store_true:
                    names = [format_arg_name(fname, "no"), format_arg_name(fname, "disable")]
        except TypeInferenceError as e:
            if meta is None:
                warn(f"factory would raise TypeInferenceError for {where}: {e}")
        if meta is not None:
            for k, v in zip(meta.keys, meta.values):
                if isinstance(k, ast.Constant) and k.value == "arg_names":
                    names = list(ast.literal_eval(v))
        out.extend((n, where) for n in names)
    return out


# ---------------------------------------------------------------- arguments.py walk

def reachable_functions(tree, root):
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, stack = [], [root]
    while stack:
        name = stack.pop()
        if name in seen or name not in funcs:
            continue
        seen.append(name)
        for n in ast.walk(funcs[name]):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in funcs:
                stack.append(n.func.id)
    return [funcs[n] for n in seen]


def resolve_exclude(node, func):
    if node is None:
        return set()
    if isinstance(node, ast.Name):
        bound = [st.value for st in ast.walk(func) if isinstance(st, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == node.id for t in st.targets)]
        if len(bound) != 1:
            raise ValueError(f"cannot resolve exclude={node.id} in {func.name}")
        node = bound[0]
    return set(ast.literal_eval(node))


def collect(reader, include_conditional=True):
    args_mod = load_module(reader, ARGS_FILE[:-3].replace("/", "."))
    mod_imports = import_map(args_mod, args_mod.tree.body)
    options = []  # (option, origin)
    for func in reachable_functions(args_mod.tree, "parse_args"):
        if func.name in CONDITIONAL_FUNCS and not include_conditional:
            continue
        local_imports = dict(mod_imports)
        local_imports.update(import_map(args_mod, [n for n in ast.walk(func)
                                                   if isinstance(n, ast.ImportFrom)]))
        for n in ast.walk(func):
            if not isinstance(n, ast.Call):
                continue
            if isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument":
                for a in n.args:
                    if not (isinstance(a, ast.Constant) and isinstance(a.value, str)):
                        raise ValueError(f"non-literal option at {ARGS_FILE}:{n.lineno}")
                    if a.value.startswith("-"):
                        options.append((a.value, f"{func.name} ({ARGS_FILE}:{n.lineno})"))
                        # argparse.BooleanOptionalAction also registers "--no-<name>"
                        # for every "--<name>" option string.
                        action = next((k.value for k in n.keywords if k.arg == "action"), None)
                        if action is not None and _tail(action) == "BooleanOptionalAction" \
                                and a.value.startswith("--"):
                            options.append(("--no-" + a.value[2:],
                                            f"{func.name} ({ARGS_FILE}:{n.lineno}, "
                                            "BooleanOptionalAction)"))
            elif isinstance(n.func, ast.Name) and n.func.id == "ArgumentGroupFactory":
                cname = n.args[0].id
                kw = {k.arg: k.value for k in n.keywords}
                exclude = resolve_exclude(kw.get("exclude", n.args[1] if len(n.args) > 1 else None),
                                          func)
                cmod, ccls = find_class(reader, *local_imports[cname])
                options.extend(factory_option_names(reader, cmod, ccls, exclude, cname))
    return options


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--checkout", help="path of a Megatron-LM working tree")
    ap.add_argument("--git-dir", default=DEFAULT_GIT_DIR)
    ap.add_argument("--commit", default=DEFAULT_COMMIT)
    ap.add_argument("--no-conditional", action="store_true",
                    help="leave out the kitchen options (added only if kitchen is installed)")
    ap.add_argument("--origins", action="store_true", help="print where each option comes from")
    a = ap.parse_args()
    reader = Reader(checkout=a.checkout) if a.checkout else Reader(git_dir=a.git_dir,
                                                                   commit=a.commit)
    opts = collect(reader, include_conditional=not a.no_conditional)
    seen = {}
    for o, origin in opts:
        if o in seen:
            warn(f"duplicate option {o}: {seen[o]} and {origin} (argparse would raise)")
        seen.setdefault(o, origin)
    for o in sorted(seen):
        print(f"{o}\t{seen[o]}" if a.origins else o)


if __name__ == "__main__":
    main()
