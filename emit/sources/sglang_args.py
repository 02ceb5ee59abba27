#!/usr/bin/env python3
"""Generator: the command-line options accepted by SGLang's
`python -m sglang.launch_server` (ServerArgs.add_cli_args) and
`python -m sglang.bench_serving`, plus the accepted values of --kv-cache-dtype,
--quantization and --speculative-algorithm, for one SGLang release.

Method (purely static, Python `ast`, stdlib only; nothing of SGLang is imported):

launch_server  (python/sglang/srt/server_args.py, ServerArgs.add_cli_args)
  1. Every `<x>.add_argument("--a", "--b", ...)` call reached from
     ServerArgs.add_cli_args (following calls to functions / ServerArgs methods of
     the same module): every string positional argument that starts with "-" is an
     option string (aliases included).  action=argparse.BooleanOptionalAction also
     registers "--no-<a>".
  2. Releases that declare options as annotated fields (>= ~0.5.13) call
     `add_cli_args_from_dataclass(parser, ServerArgs)`
     (sglang/srt/arg_groups/arg_utils.py).  Its rules are emulated: the fields are
     ServerArgs's own annotated fields (and its dataclass bases) plus, where
     server_args.py builds ServerArgs with `collect_input_fields(<module list>)`
     (>= ~0.5.20), the fields of every namespace class in that list (bases first,
     resolved through imports).  A field is a CLI option when its annotation is
     `A[T, meta...]` / `Annotated[T, meta...]` and the first meta that is an
     `Arg(...)` or a string is not `Arg(no_cli=True)`; its names are
     `Arg(cli_name=...)` or "--" + field.replace("_", "-"), plus `Arg(aliases=[...])`.
  3. Plugin hooks that register extra options at run time are not included.

bench_serving  (python/sglang/bench_serving.py)
  Every add_argument call in the `if __name__ == "__main__":` block, following calls
  to functions of the same module and functions imported with `from M import f`
  (0.5.13+ bench_serving.py is a shim that calls sglang.benchmark.serving.cli_main).

Choice sections
  [kv-cache-dtype] / [quantization]: the `choices=` of that option (add_argument
  keyword, `Arg(choices=...)`, or a `Literal[...]` field type).  A name is resolved to
  its module-level list (through imports), including module-level `X += [...]`,
  `X.extend([...])`, `X.append(...)`; run-time plugin registrations
  (add_quantization_method_choices etc.) are not included.
  [speculative-algorithm]: the option has no argparse choices (any string parses;
  SpeculativeAlgorithm.from_string validates it case-insensitively later).  The
  section lists the builtin names: the members of enum SpeculativeAlgorithm
  (sglang/srt/speculative/spec_info.py) except NONE, plus the reserved aliases
  (_RESERVED_ALIASES in spec_registry.py, e.g. NEXTN), or, in releases without that
  set, the names compared against in server_args.py's
  _resolve_speculative_algorithm_alias.

Usage:
  sglang_args.py --git-dir DIR --tag TAG            (bare git dir of sgl-project/sglang)
  sglang_args.py --checkout DIR [--tag TAG] [--commit SHA]
  sglang_args.py --wheel sglang-X-....whl --tag TAG [--commit SHA]
  [--origins]  print where each option comes from (stderr-free debugging aid)
Warnings (non-literal option strings, unresolved choices, duplicates) go to stderr.
"""

import argparse
import ast
import hashlib
import os
import subprocess
import sys
import zipfile

REPO = "sgl-project/sglang"
SERVER_ARGS = "sglang/srt/server_args.py"
BENCH = "sglang/bench_serving.py"
SPEC_INFO = "sglang/srt/speculative/spec_info.py"
SPEC_REGISTRY = "sglang/srt/speculative/spec_registry.py"
CHOICE_OPTIONS = ("--kv-cache-dtype", "--quantization", "--speculative-algorithm")


def warn(msg):
    print("WARNING: " + msg, file=sys.stderr)


# ---------------------------------------------------------------- reading sources

class Reader:
    """Reads package files (paths like 'sglang/srt/x.py') from one source.

    repo_path() gives the path inside the git repository (python/ prefix)."""

    def __init__(self, git_dir=None, rev=None, checkout=None, wheel=None):
        self.git_dir, self.rev, self.checkout, self.wheel = git_dir, rev, checkout, wheel
        self._zip = zipfile.ZipFile(wheel) if wheel else None
        self._cache = {}
        self.read_paths = []
        self._pkg_root = None
        if checkout:
            self._pkg_root = (os.path.join(checkout, "python")
                              if os.path.isdir(os.path.join(checkout, "python", "sglang"))
                              else checkout)

    @staticmethod
    def repo_path(path):
        return "python/" + path

    def read(self, path):
        if path in self._cache:
            return self._cache[path]
        text = None
        if self.git_dir:
            r = subprocess.run(["git", "-C", self.git_dir, "show",
                                f"{self.rev}:{self.repo_path(path)}"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                text = r.stdout
        elif self._zip is not None:
            try:
                text = self._zip.read(path).decode("utf-8")
            except KeyError:
                text = None
        else:
            full = os.path.join(self._pkg_root, path)
            if os.path.isfile(full):
                with open(full, encoding="utf-8") as fh:
                    text = fh.read()
        self._cache[path] = text
        if text is not None:
            self.read_paths.append(path)
        return text

    def commit(self):
        if self.git_dir:
            r = subprocess.run(["git", "-C", self.git_dir, "rev-parse",
                                f"{self.rev}^{{commit}}"], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout.strip()
        return None


class Module:
    def __init__(self, reader, name):
        self.name = name
        base = name.replace(".", "/")
        self.is_pkg = False
        self.path = base + ".py"
        src = reader.read(self.path)
        if src is None:
            self.path = base + "/__init__.py"
            src = reader.read(self.path)
            self.is_pkg = True
        if src is None:
            raise FileNotFoundError(name)
        self.tree = ast.parse(src)
        self.defs = {}      # top-level function/class name -> node
        self.assigns = {}   # top-level name -> [value nodes in order]
        self.imports = {}   # name -> (module, original name or None for a module)
        for st in self.tree.body:
            self._index(st)

    def _index(self, st):
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs[st.name] = st
        elif isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, ast.Name):
                    self.assigns.setdefault(t.id, []).append(st.value)
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
            self.assigns.setdefault(st.target.id, []).append(st.value)
        elif isinstance(st, ast.ImportFrom):
            src = self.resolve_relative(st.level, st.module)
            for a in st.names:
                self.imports[a.asname or a.name] = (src, a.name)
        elif isinstance(st, ast.Import):
            for a in st.names:
                if a.asname:
                    self.imports[a.asname] = (a.name, None)
                else:
                    top = a.name.split(".")[0]
                    self.imports[top] = (top, None)
        elif isinstance(st, (ast.If, ast.Try)):
            # module-level `if TYPE_CHECKING:` / try-import blocks
            for sub in ast.iter_child_nodes(st):
                if isinstance(sub, ast.stmt):
                    self._index(sub)
            for h in getattr(st, "handlers", []):
                for sub in h.body:
                    self._index(sub)

    def resolve_relative(self, level, module):
        if not level:
            return module
        parts = self.name.split(".")
        if not self.is_pkg:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([module] if module else []))


class Loader:
    def __init__(self, reader):
        self.reader = reader
        self.mods = {}

    def get(self, name):
        if name not in self.mods:
            try:
                self.mods[name] = Module(self.reader, name)
            except FileNotFoundError:
                self.mods[name] = None
        return self.mods[name]

    def lookup(self, mod, name, depth=0):
        """Resolve a top-level name of mod to (Module, 'def'|'assign', node-or-list)."""
        if depth > 12 or mod is None:
            return None
        if name in mod.defs:
            return mod, "def", mod.defs[name]
        if name in mod.assigns:
            return mod, "assign", mod.assigns[name]
        if name in mod.imports:
            src, orig = mod.imports[name]
            if orig is None:
                return None
            target = self.get(src)
            if target is not None:
                r = self.lookup(target, orig, depth + 1)
                if r is not None:
                    return r
            sub = self.get(src + "." + orig)  # `from pkg import submodule`
            if sub is not None:
                return sub, "module", sub
        return None


def _tail(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _str_const(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


# ---------------------------------------------------------------- option collection

class Collector:
    def __init__(self, loader):
        self.loader = loader
        self.options = []     # (option string, origin)
        self.choice_src = {}  # option -> (Module, expr node, kind) kind: 'expr'|'literal'
        self._seen_funcs = set()

    # -- add_argument calls -------------------------------------------------
    def _add_argument(self, mod, call, where):
        names = []
        for a in call.args:
            if _str_const(a):
                if a.value.startswith("-"):
                    names.append(a.value)
            elif isinstance(a, ast.Starred):
                warn(f"starred option strings at {mod.path}:{call.lineno}: {ast.unparse(a)}")
            else:
                warn(f"non-literal option string at {mod.path}:{call.lineno}: {ast.unparse(a)}")
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        origin = f"{where} ({Reader.repo_path(mod.path)}:{call.lineno})"
        self._register(names, kw.get("action"), origin)
        if "choices" in kw:
            for n in names:
                self.choice_src.setdefault(n, (mod, kw["choices"], "expr"))

    def _register(self, names, action, origin):
        for n in names:
            self.options.append((n, origin))
        if action is not None and _tail(action) == "BooleanOptionalAction":
            for n in names:
                if n.startswith("--"):
                    self.options.append(("--no-" + n[2:], origin + " BooleanOptionalAction"))

    def walk_function(self, mod, func, where, cls=None, follow_all=False):
        """Collect add_argument calls in func; follow calls that are handed a parser
        or argument group (an argument whose name contains 'parser' or 'group'),
        or, with follow_all (the __main__ block), every call."""
        key = (mod.name, func.name, cls.name if cls else None)
        if key in self._seen_funcs:
            return
        self._seen_funcs.add(key)
        local_imports = {}
        for n in ast.walk(func):
            if isinstance(n, ast.ImportFrom):
                src = mod.resolve_relative(n.level, n.module)
                for a in n.names:
                    local_imports[a.asname or a.name] = (src, a.name)
        for n in ast.walk(func):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if not (follow_all or f_is_parser_call(n)) and not (
                    isinstance(f, ast.Attribute) and f.attr == "add_argument"):
                continue
            if isinstance(f, ast.Attribute) and f.attr == "add_argument":
                self._add_argument(mod, n, where)
            elif _tail(f) == "add_cli_args_from_dataclass":
                self.dataclass_options(mod, n)
            elif isinstance(f, ast.Name):
                self._follow(mod, f.id, local_imports)
            elif (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                  and cls is not None and f.value.id in (cls.name, "cls", "self")):
                for st in cls.body:
                    if isinstance(st, ast.FunctionDef) and st.name == f.attr:
                        self.walk_function(mod, st, f"{cls.name}.{st.name}", cls)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                # module_alias.func(...)
                imp = local_imports.get(f.value.id) or mod.imports.get(f.value.id)
                if imp is not None:
                    target = self.loader.get(imp[0] if imp[1] is None
                                             else imp[0] + "." + imp[1])
                    if target is not None and f.attr in target.defs and isinstance(
                            target.defs[f.attr], ast.FunctionDef):
                        self.walk_function(target, target.defs[f.attr], f.attr)

    def _follow(self, mod, name, local_imports):
        if name in local_imports:
            src, orig = local_imports[name]
            target = self.loader.get(src)
            r = self.loader.lookup(target, orig) if target else None
        else:
            r = self.loader.lookup(mod, name)
        if r and r[1] == "def" and isinstance(r[2], (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.walk_function(r[0], r[2], r[2].name)

    # -- dataclass / msgspec field emulation -----------------------------------
    def _class(self, mod, node):
        name = _tail(node)
        if isinstance(node, ast.Name):
            r = self.loader.lookup(mod, name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            imp = mod.imports.get(node.value.id)
            target = self.loader.get(imp[0] if imp and imp[1] is None else
                                     (imp[0] + "." + imp[1]) if imp else "")
            r = self.loader.lookup(target, name) if target else None
        else:
            r = None
        if r and r[1] == "def" and isinstance(r[2], ast.ClassDef):
            return r[0], r[2]
        return None

    def class_fields(self, mod, cls, depth=0):
        """[(field name, AnnAssign, Module)] with bases first; a redefinition replaces
        the inherited field in place (dataclass and msgspec.Struct both do this)."""
        fields = {}
        if depth > 10:
            return []
        for b in cls.bases:
            found = self._class(mod, b)
            if found is None:
                continue  # object, msgspec.Struct, Enum, ...
            for name, node, m in self.class_fields(found[0], found[1], depth + 1):
                fields[name] = (node, m)
        for st in cls.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                ann = ast.unparse(st.annotation)
                if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar")):
                    continue
                fields[st.target.id] = (st, mod)
        return [(n, v[0], v[1]) for n, v in fields.items()]

    def _namespace_classes(self, mod):
        """Classes passed to collect_input_fields(...) at module level (0.5.20+)."""
        out = []
        for st in mod.tree.body:
            for n in ast.walk(st):
                if isinstance(n, ast.Call) and _tail(n.func) == "collect_input_fields":
                    arg = n.args[0] if n.args else None
                    elts = None
                    if isinstance(arg, (ast.List, ast.Tuple)):
                        elts = arg.elts
                    elif isinstance(arg, ast.Name) and arg.id in mod.assigns:
                        v = mod.assigns[arg.id][-1]
                        if isinstance(v, (ast.List, ast.Tuple)):
                            elts = v.elts
                    if elts is None:
                        warn(f"cannot resolve collect_input_fields argument at "
                             f"{mod.path}:{n.lineno}")
                        continue
                    for e in elts:
                        found = self._class(mod, e)
                        if found is None:
                            warn(f"cannot resolve namespace class {ast.unparse(e)}")
                        else:
                            out.append(found)
        return out

    def dataclass_options(self, mod, call):
        if len(call.args) < 2 or not isinstance(call.args[1], ast.Name):
            warn(f"unsupported add_cli_args_from_dataclass call at {mod.path}:{call.lineno}")
            return
        if any(k.arg == "fields" for k in call.keywords):
            warn(f"add_cli_args_from_dataclass(fields=...) at {mod.path}:{call.lineno} "
                 "is not emulated; all fields are taken")
        found = self._class(mod, call.args[1])
        if found is None:
            warn(f"cannot find class {call.args[1].id}")
            return
        cmod, cls = found
        sources = [(cmod, cls)]
        if cls.name == "ServerArgs":
            sources = self._namespace_classes(cmod) + sources
        seen = {}
        for smod, scls in sources:
            for fname, node, fmod in self.class_fields(smod, scls):
                if fname in seen:
                    warn(f"field {fname} declared by both {seen[fname]} and {scls.name}")
                    continue
                seen[fname] = scls.name
                self._field_option(fmod, scls.name, fname, node)

    def _meta_of(self, mod, node, depth=0):
        """Return ('arg', Call) | ('help', None) | (None, None) for one Annotated meta."""
        if isinstance(node, ast.Call) and _tail(node.func) == "Arg":
            return "arg", node
        if isinstance(node, ast.Call) and _tail(node.func) in ("NS", "Derived"):
            return None, None
        if _str_const(node) or isinstance(node, ast.JoinedStr):
            return "help", None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            left = self._meta_of(mod, node.left, depth + 1)
            return ("help", None) if left[0] == "help" else (None, None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("format", "join", "strip") and (
                _str_const(node.func.value) or isinstance(node.func.value, ast.JoinedStr)):
            return "help", None
        if isinstance(node, ast.Name) and depth < 5:
            r = self.loader.lookup(mod, node.id)
            if r and r[1] == "assign":
                return self._meta_of(r[0], r[2][-1], depth + 1)
        if isinstance(node, ast.Call):
            warn(f"unrecognised Annotated metadata {ast.unparse(node)[:60]} at "
                 f"{mod.path}:{node.lineno}")
        return None, None

    def _field_option(self, mod, clsname, fname, node):
        ann = node.annotation
        if _str_const(ann):
            ann = ast.parse(ann.value, mode="eval").body
        if not (isinstance(ann, ast.Subscript) and _tail(ann.value) in ("A", "Annotated")):
            return  # plain field: no automatic CLI registration
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        inner, metas = elts[0], elts[1:]
        kind, argcall = None, None
        for m in metas:
            kind, argcall = self._meta_of(mod, m)
            if kind:
                break
        if kind is None:
            return
        kw = {}
        if argcall is not None:
            if argcall.args or any(k.arg is None for k in argcall.keywords):
                warn(f"positional/** arguments to Arg at {mod.path}:{argcall.lineno}")
            kw = {k.arg: k.value for k in argcall.keywords if k.arg}
        if "no_cli" in kw:
            try:
                if ast.literal_eval(kw["no_cli"]):
                    return
            except ValueError:
                warn(f"non-literal no_cli at {mod.path}:{argcall.lineno}; field kept")
        cli_name = "--" + fname.replace("_", "-")
        if "cli_name" in kw:
            if _str_const(kw["cli_name"]):
                cli_name = kw["cli_name"].value
            else:
                warn(f"non-literal cli_name at {mod.path}:{argcall.lineno}")
        names = [cli_name]
        if "aliases" in kw:
            try:
                names += list(ast.literal_eval(kw["aliases"]))
            except ValueError:
                warn(f"non-literal aliases at {mod.path}:{argcall.lineno}")
        origin = f"{clsname}.{fname} ({Reader.repo_path(mod.path)}:{node.lineno})"
        self._register(names, kw.get("action"), origin)
        # choices: Arg(choices=...) wins, else a Literal[...] inner type (after Optional)
        lit = self._literal_values(inner)
        for n in names:
            if "choices" in kw:
                self.choice_src.setdefault(n, (mod, kw["choices"], "expr"))
            elif lit is not None:
                self.choice_src.setdefault(n, (mod, lit, "literal"))

    @staticmethod
    def _literal_values(node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            parts = [node.left, node.right]
            non_none = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
            if len(non_none) == 1:
                node = non_none[0]
        if isinstance(node, ast.Subscript) and _tail(node.value) == "Optional":
            node = node.slice
        if isinstance(node, ast.Subscript) and _tail(node.value) == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [ast.literal_eval(e) for e in elts]
        return None


def f_is_parser_call(call):
    for a in list(call.args) + [k.value for k in call.keywords]:
        if isinstance(a, ast.Name) and ("parser" in a.id.lower() or "group" in a.id.lower()):
            return True
    return False


# ---------------------------------------------------------------- choice resolution

class Unresolved(Exception):
    pass


def resolve_values(loader, mod, node, depth=0):
    if depth > 20:
        raise Unresolved("too deep")
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out += resolve_values(loader, mod, e.value, depth + 1)
            else:
                try:
                    out.append(ast.literal_eval(e))
                except ValueError:
                    raise Unresolved(ast.unparse(e))
        return out
    if isinstance(node, ast.Dict):
        return [ast.literal_eval(k) for k in node.keys]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
        return (resolve_values(loader, mod, node.left, depth + 1)
                + resolve_values(loader, mod, node.right, depth + 1))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("list", "sorted", "tuple", "set", "frozenset") and len(node.args) == 1:
        return resolve_values(loader, mod, node.args[0], depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "keys" and not node.args:
        return resolve_values(loader, mod, node.func.value, depth + 1)
    if isinstance(node, ast.Name):
        r = loader.lookup(mod, node.id)
        if r is None or r[1] != "assign":
            raise Unresolved(node.id)
        dmod, values = r[0], r[2]
        out = resolve_values(loader, dmod, values[-1], depth + 1)
        out += _module_level_mutations(loader, dmod, node.id, depth)
        return out
    raise Unresolved(ast.unparse(node))


def _module_level_mutations(loader, mod, name, depth):
    """X += [...], X.extend([...]), X.append(v) at module level after the assignment."""
    out = []
    for st in mod.tree.body:
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) and \
                st.target.id == name and isinstance(st.op, ast.Add):
            out += resolve_values(loader, mod, st.value, depth + 1)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            f = st.value.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    f.value.id == name and st.value.args:
                if f.attr == "extend":
                    out += resolve_values(loader, mod, st.value.args[0], depth + 1)
                elif f.attr == "append":
                    out.append(ast.literal_eval(st.value.args[0]))
    return out


def speculative_algorithms(loader, server_mod):
    """Builtin --speculative-algorithm names (see module docstring)."""
    names = []
    spec = loader.get(SPEC_INFO[:-3].replace("/", "."))
    cls = spec.defs.get("SpeculativeAlgorithm") if spec else None
    if cls is None:
        warn("SpeculativeAlgorithm enum not found")
        return []
    for st in cls.body:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, ast.Name) and t.id != "NONE":
                    names.append(t.id)
    aliases = None
    for modname in (SPEC_REGISTRY, SPEC_INFO):
        m = loader.get(modname[:-3].replace("/", "."))
        if m is not None and "_RESERVED_ALIASES" in m.assigns:
            try:
                aliases = resolve_values(loader, m, m.assigns["_RESERVED_ALIASES"][-1])
            except Unresolved as e:
                warn(f"cannot resolve _RESERVED_ALIASES: {e}")
            break
    if aliases is None:
        aliases = []
        fn = server_mod.defs.get("_resolve_speculative_algorithm_alias")
        if fn is not None:
            for n in ast.walk(fn):
                if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and \
                        n.left.id == "speculative_algorithm":
                    for c in n.comparators:
                        if _str_const(c):
                            aliases.append(c.value)
    return sorted(set(names) | set(aliases))


# ---------------------------------------------------------------- main

def collect_server(loader):
    mod = loader.get(SERVER_ARGS[:-3].replace("/", "."))
    cls = mod.defs.get("ServerArgs")
    if not isinstance(cls, ast.ClassDef):
        raise SystemExit("ServerArgs class not found")
    func = next((st for st in cls.body if isinstance(st, ast.FunctionDef)
                 and st.name == "add_cli_args"), None)
    if func is None:
        raise SystemExit("ServerArgs.add_cli_args not found")
    c = Collector(loader)
    c.walk_function(mod, func, "ServerArgs.add_cli_args", cls)
    return c, mod


def collect_bench(loader):
    mod = loader.get(BENCH[:-3].replace("/", "."))
    main_if = next((st for st in mod.tree.body if isinstance(st, ast.If)
                    and "__main__" in ast.unparse(st.test)), None)
    if main_if is None:
        raise SystemExit("no __main__ block in bench_serving.py")
    c = Collector(loader)
    fake = ast.FunctionDef(name="<__main__>", args=None, body=main_if.body,
                           decorator_list=[], returns=None, type_params=[])
    c.walk_function(mod, fake, "__main__", follow_all=True)
    return c


def dedupe(options, label):
    seen = {}
    for o, origin in options:
        if o in seen and seen[o] != origin:
            warn(f"[{label}] option {o} registered twice: {seen[o]} and {origin}"
                 " (argparse would raise)")
        seen.setdefault(o, origin)
    return seen


def main():
    ap = argparse.ArgumentParser(description="SGLang launch_server / bench_serving options")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", help="bare git dir of sgl-project/sglang")
    src.add_argument("--checkout", help="a working tree (or an unpacked wheel)")
    src.add_argument("--wheel", help="a PyPI sglang wheel of the release")
    ap.add_argument("--tag", help="release tag, e.g. v0.5.23 (revision read with --git-dir)")
    ap.add_argument("--commit", help="commit of the tag, when the source is not git")
    ap.add_argument("--origins", action="store_true",
                    help="append the origin of every option (tab separated)")
    a = ap.parse_args()
    if a.git_dir and not a.tag:
        ap.error("--git-dir needs --tag")
    reader = Reader(git_dir=a.git_dir, rev=a.tag, checkout=a.checkout, wheel=a.wheel)
    loader = Loader(reader)

    server, server_mod = collect_server(loader)
    bench = collect_bench(loader)
    server_opts = dedupe(server.options, "launch_server")
    bench_opts = dedupe(bench.options, "bench_serving")

    choices = {}
    for opt in CHOICE_OPTIONS:
        if opt not in server_opts:
            warn(f"{opt} is not a launch_server option")
            choices[opt] = []
            continue
        if opt in server.choice_src:
            cmod, node, kind = server.choice_src[opt]
            try:
                vals = node if kind == "literal" else resolve_values(loader, cmod, node)
            except Unresolved as e:
                warn(f"choices of {opt} not resolved: {e}")
                vals = []
            choices[opt] = sorted({str(v) for v in vals})
        elif opt == "--speculative-algorithm":
            choices[opt] = speculative_algorithms(loader, server_mod)
        else:
            warn(f"{opt} has no choices")
            choices[opt] = []

    commit = a.commit or reader.commit()
    out = [f"# repository: {REPO}",
           f"# tag: {a.tag or 'unknown'}",
           f"# commit: {commit or 'unknown (source is not a git checkout of the tag)'}"]
    if a.wheel:
        with open(a.wheel, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        dates = {}
        for info in reader._zip.infolist():
            d = "%04d-%02d-%02d" % info.date_time[:3]
            dates[d] = dates.get(d, 0) + 1
        built = max(dates, key=dates.get) if dates else "unknown"
        out.append(f"# source: PyPI wheel {os.path.basename(a.wheel)} sha256={digest}"
                   f" (file dates {built})")
    out.append("# files read: " + " ".join(Reader.repo_path(p) for p in reader.read_paths))
    out.append("# generator: emit/sources/sglang_args.py (static ast reading; see its docstring)")
    out.append("# [speculative-algorithm] has no argparse choices: builtin SpeculativeAlgorithm "
               "names plus reserved aliases, matched case-insensitively")

    def section(title, opts):
        out.append(f"[{title}]")
        for o in sorted(opts):
            out.append(f"{o}\t{opts[o]}" if a.origins and isinstance(opts, dict) else o)

    section("launch_server", server_opts)
    section("bench_serving", bench_opts)
    for opt in CHOICE_OPTIONS:
        section(opt[2:], choices[opt])
    print("\n".join(out))


if __name__ == "__main__":
    main()
