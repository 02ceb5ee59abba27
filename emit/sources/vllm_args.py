#!/usr/bin/env python3
# Generator: the command-line options that `vllm serve` and `vllm bench serve` accept,
# transcribed from vLLM's own source text for one release, plus the values accepted by
# --speculative-config (JSON keys and `method`), --kv-cache-dtype and --quantization.
#
# Method (purely static, Python `ast`, stdlib only; nothing of vLLM is imported):
#   1. Roots: `vllm serve` is built by ServeSubcommand.subparser_init
#      (vllm/entrypoints/cli/serve.py), `vllm bench serve` by
#      BenchmarkServingSubcommand.add_cli_args (vllm/entrypoints/cli/benchmark/serve.py).
#      From each root, calls are followed through the vllm package: module functions,
#      `from x import y` / `import x` (also function-local, relative, via package
#      __init__ re-exports), `Cls.method`, `cls.method`/`self.method` (bound to the class
#      the method was reached through), `super().method`.  Everything reached is scanned
#      flow-insensitively, so options added under a runtime `if` count as accepted
#      (e.g. --model, which is hidden only for `vllm serve --help`).
#   2. Every `<x>.add_argument(...)` call: its string positional arguments are option
#      strings (aliases and short forms such as -tp included).  The one dynamic form,
#      `for key, value in get_kwargs(cls).items(): add_argument(f"--{key.replace('_', '-')}")`
#      (the frontend args classes), gives "--" + field.replace("_", "-") for every
#      dataclass field of the class it was reached through (base classes included).
#   3. Boolean flags.  argparse.BooleanOptionalAction also registers "--no-<x>" for every
#      "--<x>".  It is used when add_argument says action=argparse.BooleanOptionalAction,
#      or when the kwargs come from vllm's get_kwargs(ConfigClass)["field"] (possibly via a
#      variable or a `{**..., "default": ...}` merge) and, as in
#      vllm/engine/arg_utils.py:_compute_kwargs, the field's type hints (Annotated/Optional/
#      Union/`|` and module type aliases unwrapped) contain `bool`, are not exactly
#      {bool, str, None} (that one is a `nargs="?"` flag) and contain no dataclass.
#      Where the release's FlexibleArgumentParser (vllm/utils/argparse_utils.py) registers
#      EnableDisableAction in place of BooleanOptionalAction, its `_inverse_prefixes`
#      (--enable-x <-> --disable-x) are added as well.
#   4. argparse adds -h/--help to every parser; they are listed.
#   5. Values: [speculative-config] = fields of SpeculativeConfig (the JSON keys
#      --speculative-config accepts); [speculative-config method] = the Literal values of
#      its `method` field (nested Literal aliases flattened); [kv-cache-dtype] = the Literal
#      values of the field behind --kv-cache-dtype; [quantization] = QUANTIZATION_METHODS
#      of vllm/model_executor/layers/quantization/__init__.py.
#
# Not covered: options an out-of-tree platform or general plugin adds at run time
# (current_platform.pre_register_and_update(parser), load_general_plugins()); vLLM's
# FlexibleArgumentParser also accepts `--a_b` for `--a-b`, `--json-arg.key value` for
# JSON options and `-O<n>` for --optimization-level: those spellings are not listed.
#
# Usage:
#   vllm_args.py --git-dir DIR --tag TAG      (a bare or normal git dir of vllm-project/vllm)
#   vllm_args.py --src DIR [--commit SHA]     (an unpacked source tree, e.g. the PyPI sdist)
#   [-o FILE]                                 (default: stdout)

import argparse
import ast
import os
import re
import subprocess
import sys

REPO_URL = "https://github.com/vllm-project/vllm"


class Reader:
    """Reads repository files from a git dir at a tag/commit, or from a source tree."""

    def __init__(self, git_dir=None, tag=None, src=None):
        self.git_dir, self.tag, self.src = git_dir, tag, src
        self.read = []  # paths read, in order
        self._cache = {}
        if git_dir:
            self.commit = subprocess.check_output(
                ["git", "-C", git_dir, "rev-parse", f"{tag}^{{commit}}"], text=True
            ).strip()
            self._paths = set(
                subprocess.check_output(
                    ["git", "-C", git_dir, "ls-tree", "-r", "--name-only", self.commit, "vllm"],
                    text=True,
                ).split("\n")
            )

    def exists(self, path):
        if self.git_dir:
            return path in self._paths
        return os.path.isfile(os.path.join(self.src, path))

    def text(self, path):
        if path not in self._cache:
            if self.git_dir:
                t = subprocess.check_output(
                    ["git", "-C", self.git_dir, "show", f"{self.commit}:{path}"], text=True
                )
            else:
                with open(os.path.join(self.src, path), encoding="utf-8") as f:
                    t = f.read()
            self._cache[path] = t
            self.read.append(path)
        return self._cache[path]


class Module:
    def __init__(self, name, path, tree, is_pkg):
        self.name, self.path, self.tree, self.is_pkg = name, path, tree, is_pkg
        self.funcs, self.classes, self.assigns, self.imports = {}, {}, {}, {}
        for node in tree.body:
            self._index(node)

    def _index(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            self.classes[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.assigns[t.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            self.assigns[node.target.id] = node.value
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            add_imports(self.imports, node, self)
        elif isinstance(node, (ast.If, ast.Try)):
            # `if TYPE_CHECKING:` / `try: import ...` blocks
            for sub in ast.iter_child_nodes(node):
                if isinstance(sub, ast.stmt):
                    self._index(sub)
            for h in getattr(node, "handlers", []):
                for sub in h.body:
                    self._index(sub)


def add_imports(table, node, mod):
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                table[a.asname] = ("module", a.name, None)
            else:
                top = a.name.split(".")[0]
                table[top] = ("module", top, None)
    else:
        base = node.module or ""
        if node.level:
            parts = mod.name.split(".")
            if not mod.is_pkg:
                parts = parts[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        for a in node.names:
            table[a.asname or a.name] = ("from", base, a.name)


class Sym:
    """A resolved name: kind in {module, func, class, assign}."""

    def __init__(self, kind, mod, node=None, name=None):
        self.kind, self.mod, self.node, self.name = kind, mod, node, name

    def key(self):
        return (self.kind, self.mod.name if self.mod else None, id(self.node))


class Project:
    def __init__(self, reader):
        self.reader = reader
        self.modules = {}

    def module(self, name):
        if name in self.modules:
            return self.modules[name]
        m = None
        if name == "vllm" or name.startswith("vllm."):
            base = name.replace(".", "/")
            for path, is_pkg in ((base + ".py", False), (base + "/__init__.py", True)):
                if self.reader.exists(path):
                    m = Module(name, path, ast.parse(self.reader.text(path)), is_pkg)
                    break
        self.modules[name] = m
        return m

    def lookup(self, mod, name, depth=0):
        if mod is None or depth > 20:
            return None
        if name in mod.funcs:
            return Sym("func", mod, mod.funcs[name], name)
        if name in mod.classes:
            return Sym("class", mod, mod.classes[name], name)
        if name in mod.imports:
            return self.resolve_import(mod.imports[name], depth)
        if name in mod.assigns:
            return Sym("assign", mod, mod.assigns[name], name)
        if mod.is_pkg:
            sub = self.module(f"{mod.name}.{name}")
            if sub:
                return Sym("module", sub)
        return None

    def resolve_import(self, imp, depth=0):
        kind, modname, attr = imp
        if kind == "module":
            m = self.module(modname)
            return Sym("module", m) if m else None
        m = self.module(modname)
        if m is None:
            return None
        s = self.lookup(m, attr, depth + 1)
        if s is None:
            sub = self.module(f"{modname}.{attr}")
            if sub:
                return Sym("module", sub)
        return s

    # ---- classes -------------------------------------------------------------
    def class_bases(self, csym):
        out = []
        for b in csym.node.bases:
            s = self.resolve_expr(b, csym.mod, {}, None)
            if s is not None and s.kind == "class":
                out.append(s)
        return out

    def mro(self, csym, seen=None):
        seen = seen if seen is not None else set()
        if csym.key() in seen:
            return []
        seen.add(csym.key())
        out = [csym]
        for b in self.class_bases(csym):
            for c in self.mro(b, seen):
                if c.key() not in {x.key() for x in out}:
                    out.append(c)
        return out

    def find_method(self, csym, name, after=None):
        chain = self.mro(csym)
        if after is not None:
            keys = [c.key() for c in chain]
            if after.key() in keys:
                chain = chain[keys.index(after.key()) + 1 :]
        for c in chain:
            for n in c.node.body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
                    return c, n
        return None, None

    def is_dataclass(self, csym):
        for d in csym.node.decorator_list:
            f = d.func if isinstance(d, ast.Call) else d
            nm = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if nm in ("dataclass", "config"):
                return True
        return False

    def fields(self, csym):
        """Dataclass fields in dataclasses.fields() order: name -> (annotation, module)."""
        out = {}
        for c in reversed(self.mro(csym)):
            for n in c.node.body:
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                    ann = n.annotation
                    txt = ast.unparse(ann)
                    if re.match(r"^(typing\.)?(ClassVar|InitVar|dataclasses\.InitVar)\b", txt):
                        continue
                    out[n.target.id] = (ann, c.mod)
        return out

    # ---- expressions ---------------------------------------------------------
    def resolve_expr(self, e, mod, local_imports, cls_ctx):
        if isinstance(e, ast.Name):
            if e.id in ("cls", "self") and cls_ctx is not None:
                return cls_ctx
            if e.id in local_imports:
                return self.resolve_import(local_imports[e.id])
            return self.lookup(mod, e.id)
        if isinstance(e, ast.Attribute):
            base = self.resolve_expr(e.value, mod, local_imports, cls_ctx)
            if base is None:
                return None
            if base.kind == "module":
                return self.lookup(base.mod, e.attr)
            if base.kind == "class":
                owner, fn = self.find_method(base, e.attr)
                if fn is not None:
                    return Sym("method", owner.mod, fn, e.attr)
        return None

    # ---- type hints ----------------------------------------------------------
    def hint_set(self, ann, mod, depth=0):
        """Flattened top-level type hints, as names: bool/str/None/int/.../dataclass/..."""
        if depth > 15 or ann is None:
            return set()
        if isinstance(ann, ast.Constant):
            if ann.value is None:
                return {"None"}
            if isinstance(ann.value, str):
                try:
                    return self.hint_set(ast.parse(ann.value, mode="eval").body, mod, depth + 1)
                except SyntaxError:
                    return {"?"}
            return {"?"}
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return self.hint_set(ann.left, mod, depth + 1) | self.hint_set(ann.right, mod, depth + 1)
        if isinstance(ann, ast.Subscript):
            origin = ast.unparse(ann.value).split(".")[-1]
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            if origin == "Optional":
                return self.hint_set(elts[0], mod, depth + 1) | {"None"}
            if origin == "Union":
                out = set()
                for x in elts:
                    out |= self.hint_set(x, mod, depth + 1)
                return out
            if origin == "Annotated":
                return self.hint_set(elts[0], mod, depth + 1)
            return {origin}
        if isinstance(ann, ast.Name) and ann.id in ("bool", "str", "int", "float", "None", "dict", "list", "tuple", "set", "Any"):
            return {ann.id}
        s = self.resolve_expr(ann, mod, {}, None)
        if s is None:
            return {ast.unparse(ann)}
        if s.kind == "assign":
            return self.hint_set(s.node, s.mod, depth + 1)
        if s.kind == "class":
            return {"dataclass"} if self.is_dataclass(s) else {s.name}
        return {ast.unparse(ann)}

    def is_bool_field(self, ann, mod):
        h = self.hint_set(ann, mod)
        if "dataclass" in h:
            return False
        if h == {"bool", "str", "None"}:
            return False
        return "bool" in h

    def literal_values(self, e, mod, depth=0):
        """Values of a Literal[...] (nested Literal aliases flattened, in order)."""
        if depth > 15 or e is None:
            return []
        if isinstance(e, ast.Constant) and isinstance(e.value, str) and depth == 0:
            try:
                e = ast.parse(e.value, mode="eval").body
            except SyntaxError:
                return []
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
            return self.literal_values(e.left, mod, depth + 1) + self.literal_values(e.right, mod, depth + 1)
        if isinstance(e, ast.Subscript):
            origin = ast.unparse(e.value).split(".")[-1]
            elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            out = []
            if origin == "Literal":
                for x in elts:
                    if isinstance(x, ast.Constant):
                        out.append(x.value)
                    else:
                        out += self.literal_values(x, mod, depth + 1)
            elif origin in ("Optional", "Union", "Annotated"):
                for x in elts[:1] if origin == "Annotated" else elts:
                    out += self.literal_values(x, mod, depth + 1)
            return out
        if isinstance(e, (ast.Name, ast.Attribute)):
            s = self.resolve_expr(e, mod, {}, None)
            if s is not None and s.kind == "assign":
                return self.literal_values(s.node, s.mod, depth + 1)
        return []


class Rec:
    """One add_argument call (or one field of a dynamic frontend loop)."""

    def __init__(self, opts, bool_src, where):
        self.opts, self.bool_src, self.where = opts, bool_src, where


class Walker:
    def __init__(self, proj):
        self.p = proj
        self.seen = set()
        self.recs = []
        self.action_overrides = {}  # field name -> action expr text (X["f"]["action"] = ...)

    def walk(self, fn, mod, cls_ctx, owner):
        key = (mod.name, id(fn), cls_ctx.key() if cls_ctx else None)
        if key in self.seen:
            return
        self.seen.add(key)
        local_imports = {}
        env = {}
        loops = {}
        for n in ast.walk(fn):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                add_imports(local_imports, n, mod)
            elif isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        env.setdefault(t.id, []).append(n.value)
                    elif (
                        isinstance(t, ast.Subscript)
                        and isinstance(t.slice, ast.Constant)
                        and t.slice.value == "action"
                        and isinstance(t.value, ast.Subscript)
                        and isinstance(t.value.slice, ast.Constant)
                    ):
                        self.action_overrides[t.value.slice.value] = ast.unparse(n.value)
            elif isinstance(n, ast.For) and isinstance(n.target, ast.Tuple):
                it = n.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items":
                    k = n.target.elts[0]
                    if isinstance(k, ast.Name):
                        loops[k.id] = it.func.value
        ctx = (mod, local_imports, cls_ctx, env)
        for n in ast.walk(fn):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "add_argument":
                self.add_argument(n, ctx, loops)
                continue
            self.follow(n, ctx, owner)

    def follow(self, call, ctx, owner):
        mod, local_imports, cls_ctx, env = ctx
        f = call.func
        # super().method(...)
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Call)
            and isinstance(f.value.func, ast.Name)
            and f.value.func.id == "super"
        ):
            if cls_ctx is not None and owner is not None:
                c, fn = self.p.find_method(cls_ctx, f.attr, after=owner)
                if fn is not None:
                    self.walk(fn, c.mod, cls_ctx, c)
            return
        if isinstance(f, ast.Attribute):
            base = self.p.resolve_expr(f.value, mod, local_imports, cls_ctx)
            if base is None:
                return
            if base.kind == "class":
                c, fn = self.p.find_method(base, f.attr)
                if fn is not None:
                    self.walk(fn, c.mod, base, c)
                return
            if base.kind == "module":
                s = self.p.lookup(base.mod, f.attr)
                if s is not None and s.kind == "func":
                    self.walk(s.node, s.mod, None, None)
            return
        s = self.p.resolve_expr(f, mod, local_imports, cls_ctx)
        if s is not None and s.kind == "func":
            self.walk(s.node, s.mod, None, None)

    # ---- kwargs sources --------------------------------------------------------
    def kw_source(self, e, ctx, depth=0):
        """-> (class Sym or None, field or None, explicit action text or None)."""
        mod, local_imports, cls_ctx, env = ctx
        if depth > 10:
            return None, None, None
        if isinstance(e, ast.Call):
            fname = ast.unparse(e.func).split(".")[-1]
            if fname in ("get_kwargs", "_compute_kwargs") and e.args:
                c = self.p.resolve_expr(e.args[0], mod, local_imports, cls_ctx)
                if c is not None and c.kind == "class":
                    return c, None, None
            return None, None, None
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
            c, fld, act = self.kw_source(e.value, ctx, depth + 1)
            if c is not None and fld is None:
                return c, e.slice.value, act
            return None, None, None
        if isinstance(e, ast.Name) and e.id in env:
            for v in reversed(env[e.id]):
                r = self.kw_source(v, ctx, depth + 1)
                if r[0] is not None:
                    return r
            return None, None, None
        if isinstance(e, ast.Dict):
            c = fld = act = None
            for k, v in zip(e.keys, e.values):
                if k is None:
                    c2, f2, a2 = self.kw_source(v, ctx, depth + 1)
                    if c2 is not None:
                        c, fld = c2, f2
                    if a2 is not None:
                        act = a2
                elif isinstance(k, ast.Constant) and k.value == "action":
                    act = ast.unparse(v)
            return c, fld, act
        return None, None, None

    def add_argument(self, call, ctx, loops):
        mod, local_imports, cls_ctx, env = ctx
        where = f"{mod.path}:{call.lineno}"
        explicit = None
        for kw in call.keywords:
            if kw.arg == "action":
                explicit = ast.unparse(kw.value)
        src = (None, None, None)
        for kw in call.keywords:
            if kw.arg is None:
                src = self.kw_source(kw.value, ctx)
        opts = []
        for a in call.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                opts.append(a.value)
            elif isinstance(a, ast.JoinedStr):
                # f"--{key.replace('_', '-')}" inside `for key, value in K.items()`
                txt = ast.unparse(a)
                m = re.match(r"""^f(['"])--\{(\w+)\.replace\((['"])_\3, (['"])-\4\)\}\1$""", txt)
                if not m or m.group(2) not in loops:
                    print(f"warning: unhandled option form {txt} at {where}", file=sys.stderr)
                    continue
                c, _, _ = self.kw_source(loops[m.group(2)], ctx)
                if c is None:
                    print(f"warning: cannot resolve loop source at {where}", file=sys.stderr)
                    continue
                for fname in self.p.fields(c):
                    self.recs.append(
                        Rec(["--" + fname.replace("_", "-")], (explicit, c, fname, None), where)
                    )
        if opts:
            c, fld, act = src
            self.recs.append(Rec(opts, (explicit, c, fld, act), where))

    def is_bool(self, rec):
        explicit, c, fld, act = rec.bool_src
        action = explicit or act
        if action is None and fld is not None and fld in self.action_overrides:
            action = self.action_overrides[fld]
        if action is not None:
            return action.split(".")[-1] == "BooleanOptionalAction"
        if c is None or fld is None:
            return False
        flds = self.p.fields(c)
        if fld not in flds:
            print(f"warning: {c.name} has no field {fld} ({rec.where})", file=sys.stderr)
            return False
        ann, fmod = flds[fld]
        return self.p.is_bool_field(ann, fmod)


def enable_disable_inverses(proj):
    """_inverse_prefixes of EnableDisableAction when FlexibleArgumentParser registers it."""
    m = proj.module("vllm.utils.argparse_utils")
    if m is None or "EnableDisableAction" not in m.classes:
        return {}
    registered = False
    for n in ast.walk(m.tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "register"
            and len(n.args) == 3
            and ast.unparse(n.args[0]).strip("'\"") == "action"
            and ast.unparse(n.args[1]).split(".")[-1] == "BooleanOptionalAction"
            and ast.unparse(n.args[2]) == "EnableDisableAction"
        ):
            registered = True
    if not registered:
        return {}
    for n in m.classes["EnableDisableAction"].body:
        tgt = n.target if isinstance(n, ast.AnnAssign) else (n.targets[0] if isinstance(n, ast.Assign) else None)
        if isinstance(tgt, ast.Name) and tgt.id == "_inverse_prefixes" and isinstance(n.value, ast.Dict):
            return {k.value: v.value for k, v in zip(n.value.keys, n.value.values)}
    return {}


def collect(proj, modname, clsname, method):
    m = proj.module(modname)
    if m is None or clsname not in m.classes:
        raise SystemExit(f"error: {modname}.{clsname} not found")
    csym = Sym("class", m, m.classes[clsname], clsname)
    owner, fn = proj.find_method(csym, method)
    if fn is None:
        raise SystemExit(f"error: {modname}.{clsname}.{method} not found")
    w = Walker(proj)
    w.walk(fn, owner.mod, csym, owner)
    inverses = enable_disable_inverses(proj)
    opts = {"-h", "--help"}  # argparse add_help
    for r in w.recs:
        opts.update(r.opts)
        if w.is_bool(r):
            for o in r.opts:
                if o.startswith("--"):
                    opts.add("--no-" + o[2:])
                for pre, inv in inverses.items():
                    if o.startswith(pre):
                        opts.add(inv + o[len(pre):])
    return sorted(opts), w


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--git-dir")
    ap.add_argument("--tag")
    ap.add_argument("--src", help="unpacked source tree (e.g. PyPI sdist) instead of git")
    ap.add_argument(
        "--commit",
        help="full commit hash to print when reading --src (must start with the"
        " tree's vllm/_version.py __commit_id__)",
    )
    ap.add_argument("--note", action="append", default=[], help="extra '# note:' header line")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    if bool(a.git_dir) == bool(a.src):
        ap.error("give exactly one of --git-dir/--src")
    if a.git_dir and not a.tag:
        ap.error("--git-dir needs --tag")
    reader = Reader(git_dir=a.git_dir, tag=a.tag, src=a.src)
    proj = Project(reader)

    header = [f"# repository: {REPO_URL}"]
    if a.git_dir:
        header += [f"# tag: {a.tag}", f"# commit: {reader.commit}"]
    else:
        ver = re.search(r"__version__\s*=\s*version\s*=\s*'([^']+)'", reader.text("vllm/_version.py"))
        cid = re.search(r"__commit_id__\s*=\s*commit_id\s*=\s*'g?([0-9a-f]+)'", reader.text("vllm/_version.py"))
        tag = a.tag or (f"v{ver.group(1)}" if ver else "?")
        short = cid.group(1) if cid else None
        if a.commit and short and not a.commit.startswith(short):
            raise SystemExit(f"error: --commit {a.commit} does not match __commit_id__ g{short}")
        header += [
            f"# tag: {tag}",
            f"# commit: {a.commit or short or '?'}"
            + ("" if a.commit else " (abbreviated: the full hash was not available here)"),
            f"# source: {os.path.basename(os.path.abspath(a.src))}, the release's source tree"
            f" (vllm/_version.py: version {ver.group(1) if ver else '?'}, __commit_id__ g{short})",
        ]

    serve, _ = collect(proj, "vllm.entrypoints.cli.serve", "ServeSubcommand", "subparser_init")
    bench, _ = collect(
        proj, "vllm.entrypoints.cli.benchmark.serve", "BenchmarkServingSubcommand", "add_cli_args"
    )
    # --kv-cache-dtype: the field behind it
    _, w = collect(proj, "vllm.entrypoints.cli.serve", "ServeSubcommand", "subparser_init")
    kv_values = []
    for r in w.recs:
        if "--kv-cache-dtype" in r.opts and r.bool_src[1] is not None:
            ann, fmod = proj.fields(r.bool_src[1])[r.bool_src[2]]
            kv_values = proj.literal_values(ann, fmod)
    # SpeculativeConfig
    sm = proj.module("vllm.config.speculative")
    spec = Sym("class", sm, sm.classes["SpeculativeConfig"], "SpeculativeConfig")
    spec_fields = proj.fields(spec)
    ann, fmod = spec_fields["method"]
    methods = proj.literal_values(ann, fmod)
    # QUANTIZATION_METHODS
    qm = proj.module("vllm.model_executor.layers.quantization")
    qv = qm.assigns.get("QUANTIZATION_METHODS")
    quant = []
    if isinstance(qv, ast.List):
        quant = [x.value for x in qv.elts if isinstance(x, ast.Constant)]
    else:
        for n in ast.walk(qv):
            if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("get_args") and n.args:
                quant = proj.literal_values(n.args[0], qm)

    def uniq(xs):
        out = []
        for x in xs:
            if x not in out:
                out.append(x)
        return out

    header += [f"# note: {n}" for n in a.note]
    header.append("# files read: " + " ".join(reader.read))
    header.append("# generator: emit/sources/vllm_args.py")
    header.append(
        "# sections: [serve] [bench serve] option strings, sorted (aliases, short forms and"
        " --no-/--enable-/--disable- forms of boolean flags included; -h/--help from argparse);"
    )
    header.append(
        "#   [speculative-config] SpeculativeConfig fields = JSON keys of --speculative-config;"
        " [speculative-config method] its accepted `method` values (source order);"
    )
    header.append(
        "#   [kv-cache-dtype] CacheConfig.cache_dtype Literal values (source order);"
        " [quantization] QUANTIZATION_METHODS (source order)"
    )
    lines = header
    lines += ["[serve]"] + serve
    lines += ["[bench serve]"] + bench
    lines += ["[speculative-config]"] + list(spec_fields)
    lines += ["[speculative-config method]"] + uniq(methods)
    lines += ["[kv-cache-dtype]"] + uniq(kv_values)
    lines += ["[quantization]"] + uniq(quant)
    out = "\n".join(str(x) for x in lines) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(out)
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
