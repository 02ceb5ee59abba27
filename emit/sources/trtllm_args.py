#!/usr/bin/env python3
"""Generator: the names trtllm-serve, its --extra_llm_api_options YAML and benchmark_serving accept.

Source: NVIDIA/TensorRT-LLM at a release tag, read from a bare git mirror (`git show TAG:path`),
or from a plain directory tree of the same files (--src-root, for files got some other way; the
commit must then be given with --commit).

Method (static, Python `ast`; nothing of tensorrt_llm, click or pydantic is imported):
  [trtllm-serve]  tensorrt_llm/commands/serve.py: the function decorated `@click.command("serve")`
      (falling back to a function named `serve`); every option string (a string argument that
      starts with "-") of each `@<x>.option(...)` decorator on it, aliases included
      ("--tensor_parallel_size", "--tp_size"); "--a/--b" boolean pairs give both names.  A
      decorator that is a plain name (a shared option-set decorator) is followed to its
      definition in serve.py or the module it is imported from, and every `.option(...)` call in
      that function counts.  A decorator that calls a plain name with option strings (an option
      wrapper, `@stability_option("--tensor_parallel_size", "--tp_size", status=..., help=...)`)
      gives those strings too.  click's implicit --help is not listed.
  [llm_api]  tensorrt_llm/llmapi/llm_args.py: the pydantic fields of TorchLlmArgs (the PyTorch
      backend's args, what the YAML is validated into), its bases (BaseLlmArgs, ...) followed
      through the file and through `from ... import` of other tensorrt_llm modules.  A field is
      an annotated class-level name (`name: T = Field(...)`, `name: T = v` or `name: T`) not
      starting with "_", not `model_config`, not ClassVar.  A string `alias=` or
      `validation_alias=` ("x" or AliasChoices("x", "y")) in Field(...) is listed too (pydantic
      accepts those as the YAML key).  A name that is a type alias rather than a class
      (`CudaGraphConfig = Annotated[Union[A, B], ...]`) gives the union of its classes' fields.
  [kv_cache_config] KvCacheConfig, [cuda_graph_config] CudaGraphConfigType where the file has it
      (the type of TorchLlmArgs.cuda_graph_config in newer trees: decode and encode graph configs,
      the mode inferred from the keys), else CudaGraphConfig,
  [speculative_config MTP] MTPDecodingConfig (with DecodingBaseConfig's fields, the bases being
      followed the same way); its `decoding_type` (a ClassVar in older releases, a
      Literal-typed field in newer ones) is listed as a key, and its value goes in a header
      comment.
  [benchmark_serving]  tensorrt_llm/serve/scripts/benchmark_serving.py: every option string of
      every `<x>.add_argument(...)` call in the module, and in functions it imports from other
      tensorrt_llm modules and calls (shared parser helpers).  action=BooleanOptionalAction
      also registers "--no-<name>".  argparse's implicit -h/--help is not listed.
  Modules of tensorrt_llm that an import names but the tree lacks are listed on stderr (with
  --src-root: files not downloaded); what they would define is not followed.

Usage:
  trtllm_args.py --git-dir /work/.mirror/NVIDIA+TensorRT-LLM/repo --tag v1.2.0 > emit/testdata/trtllm_v1.2.0.txt
  trtllm_args.py --src-root DIR --tag v1.2.0 --commit SHA > ...
  trtllm_args.py --src-root DIR --tag main --commit SHA \
      --file-commit tensorrt_llm/serve/scripts/benchmark_serving.py=SHA2 > ...
      (files got one by one, not all at --commit: each such file's own commit is written as a
      `# <path>: <commit>` header line)
"""
import argparse
import ast
import os
import subprocess
import sys

REPO = "NVIDIA/TensorRT-LLM"
SERVE = "tensorrt_llm/commands/serve.py"
LLM_ARGS = "tensorrt_llm/llmapi/llm_args.py"
BENCH = "tensorrt_llm/serve/scripts/benchmark_serving.py"


class Reader:
    """Files of one tree: a bare git dir at a tag, or a directory."""

    def __init__(self, git_dir=None, tag=None, src_root=None):
        self.git_dir, self.tag, self.src_root = git_dir, tag, src_root
        self.read_paths = []
        self.missing = []
        self._cache = {}

    def commit(self):
        r = subprocess.run(["git", "-C", self.git_dir, "rev-parse", f"{self.tag}^{{commit}}"],
                           check=True, capture_output=True, text=True)
        return r.stdout.strip()

    def read(self, path):
        """Text of path, or None where the tree has no such file."""
        if path in self._cache:
            return self._cache[path]
        text = None
        if self.src_root:
            full = os.path.join(self.src_root, path)
            if os.path.isfile(full):
                with open(full, encoding="utf-8") as fh:
                    text = fh.read()
        else:
            r = subprocess.run(["git", "-C", self.git_dir, "show", f"{self.tag}:{path}"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                text = r.stdout
        self._cache[path] = text
        if text is not None:
            self.read_paths.append(path)
        return text

    def parse(self, path):
        text = self.read(path)
        return None if text is None else ast.parse(text, filename=path)


def module_path(reader, importer, node):
    """Repository path of the module an ImportFrom in file `importer` names (None: not ours)."""
    if node.level:
        base = importer.split("/")[:-1]
        base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
        mod = "/".join(base + (node.module.split(".") if node.module else []))
    else:
        if not node.module or not node.module.startswith("tensorrt_llm"):
            return None
        mod = node.module.replace(".", "/")
    for cand in (mod + ".py", mod + "/__init__.py"):
        if reader.read(cand) is not None:
            return cand
    if mod not in reader.missing:
        reader.missing.append(mod)
    return None


def resolve(reader, path, name, kind, seen=None):
    """(path, node) of the top-level def of `name` (ClassDef or FunctionDef per kind) visible in
    the module `path`: defined there, or imported there (re-exports followed)."""
    seen = seen or set()
    if (path, name) in seen:
        return None
    seen.add((path, name))
    tree = reader.parse(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, kind) and node.name == name:
            return path, node
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if (a.asname or a.name) == name:
                    target = module_path(reader, path, node)
                    if target:
                        found = resolve(reader, target, a.name, kind, seen)
                        if found:
                            return found
    return None


def resolve_assign(reader, path, name):
    """(path, value) of a module-level `name = value` / `name: T = value` visible in `path`."""
    tree = reader.parse(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return path, node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name and node.value:
            return path, node.value
    return None


def strings(call):
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def option_names(call):
    out = []
    for s in strings(call):
        if s.startswith("-"):
            out += [p for p in s.split("/") if p.startswith("-")]
    return out


def is_attr_call(node, attr):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


def deco_name(d):
    """Name of a plain-name decorator (`@x` or `@x(...)`), else None."""
    if isinstance(d, ast.Call):
        d = d.func
    return d.id if isinstance(d, ast.Name) else None


# --- [trtllm-serve] -------------------------------------------------------------------------

def serve_options(reader):
    tree = reader.parse(SERVE)
    if tree is None:
        sys.exit(f"{SERVE}: not in the tree")
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    target = None
    for f in funcs:
        for d in f.decorator_list:
            if is_attr_call(d, "command") and strings(d)[:1] == ["serve"]:
                target = f
    if target is None:
        target = next((f for f in funcs if f.name == "serve"), None)
    if target is None:
        sys.exit(f"{SERVE}: no serve command")
    names = set()
    for d in target.decorator_list:
        if is_attr_call(d, "option"):
            names.update(option_names(d))
        elif deco_name(d):
            if isinstance(d, ast.Call):
                # an option wrapper: @stability_option("--port", type=int, status="beta", help=...)
                names.update(option_names(d))
            found = resolve(reader, SERVE, deco_name(d), ast.FunctionDef)
            if found:
                for n in ast.walk(found[1]):
                    if is_attr_call(n, "option"):
                        names.update(option_names(n))
    return names


# --- pydantic fields ---------------------------------------------------------------------------

def is_classvar(ann):
    if isinstance(ann, ast.Subscript):
        ann = ann.value
    return (isinstance(ann, ast.Name) and ann.id == "ClassVar") or \
        (isinstance(ann, ast.Attribute) and ann.attr == "ClassVar")


def literal_strings(node):
    """String values in Literal[...] anywhere in an annotation."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and ((isinstance(n.value, ast.Name) and n.value.id == "Literal") or
                                             (isinstance(n.value, ast.Attribute) and n.value.attr == "Literal")):
            out += [c.value for c in ast.walk(n.slice) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return out


def class_fields(reader, path, name, seen=None):
    """{field or alias: None} of class `name` visible in `path`, its bases' first, and
    {'decoding_type': value} details in a second dict."""
    seen = seen if seen is not None else set()
    found = resolve(reader, path, name, ast.ClassDef)
    if found is None:
        # a type alias (`CudaGraphConfig = Annotated[Union[A, B], ...]`): the union of the
        # fields of every class it names
        alias = resolve_assign(reader, path, name)
        if alias is None:
            return {}, {}
        apath, value = alias
        fields, extra = {}, {}
        for n in ast.walk(value):
            if isinstance(n, ast.Name) and n.id != name and resolve(reader, apath, n.id, ast.ClassDef):
                f, e = class_fields(reader, apath, n.id, seen)
                fields.update(f)
                extra.update(e)
        return fields, extra
    cpath, cls = found
    if (cpath, cls.name) in seen:
        return {}, {}
    seen.add((cpath, cls.name))
    fields, extra = {}, {}
    for b in cls.bases:
        bname = b.id if isinstance(b, ast.Name) else None
        if bname and bname not in ("BaseModel", "ABC", "object", "Generic"):
            f, e = class_fields(reader, cpath, bname, seen)
            fields.update(f)
            extra.update(e)
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        fname = node.target.id
        if fname == "decoding_type":
            # a ClassVar in older releases, a Literal field in newer ones: the YAML key either way
            value = None
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                value = node.value.value
            lits = literal_strings(node.annotation)
            extra["decoding_type"] = value or (lits[0] if lits else None)
            fields["decoding_type"] = None
            continue
        if fname.startswith("_") or fname == "model_config" or is_classvar(node.annotation):
            continue
        fields[fname] = None
        v = node.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id.endswith("Field"):
            for kw in v.keywords:
                if kw.arg in ("alias", "validation_alias"):
                    # "name", or AliasChoices("a", "b") (AliasPath items are not plain keys)
                    vals = [kw.value] if isinstance(kw.value, ast.Constant) else \
                        (kw.value.args if isinstance(kw.value, ast.Call) and getattr(kw.value.func, "id", "") == "AliasChoices" else [])
                    for a in vals:
                        if isinstance(a, ast.Constant) and isinstance(a.value, str):
                            fields[a.value] = None
    return fields, extra


# --- [benchmark_serving] -------------------------------------------------------------------------

def argparse_names(tree):
    names = set()
    for n in ast.walk(tree):
        if is_attr_call(n, "add_argument"):
            opts = option_names(n)
            names.update(opts)
            for kw in n.keywords:
                if kw.arg == "action" and ((isinstance(kw.value, ast.Attribute) and kw.value.attr == "BooleanOptionalAction") or
                                           (isinstance(kw.value, ast.Name) and kw.value.id == "BooleanOptionalAction")):
                    names.update("--no-" + o[2:] for o in opts if o.startswith("--"))
    return names


def bench_options(reader):
    tree = reader.parse(BENCH)
    if tree is None:
        sys.exit(f"{BENCH}: not in the tree")
    names = argparse_names(tree)
    local = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for fname in sorted(called - local):
        found = resolve(reader, BENCH, fname, ast.FunctionDef)
        if found and found[0] != BENCH:
            names |= argparse_names(found[1])
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-dir", help="bare git dir of NVIDIA/TensorRT-LLM")
    ap.add_argument("--tag", required=True, help="release tag, e.g. v1.2.0")
    ap.add_argument("--src-root", help="read the files from this directory instead of git")
    ap.add_argument("--commit", help="with --src-root: the full commit hash the files are from")
    ap.add_argument("--file-commit", action="append", default=[], metavar="PATH=SHA",
                    help="with --src-root: a file taken at another commit than --commit (repeatable)")
    a = ap.parse_args()
    if bool(a.git_dir) == bool(a.src_root):
        ap.error("give one of --git-dir and --src-root")
    if a.src_root and not a.commit:
        ap.error("--src-root needs --commit")
    file_commits = {}
    for fc in a.file_commit:
        path, sep, sha = fc.partition("=")
        if not sep or not path or not sha:
            ap.error(f"--file-commit {fc!r}: want PATH=SHA")
        if not a.src_root:
            ap.error("--file-commit needs --src-root")
        file_commits[path] = sha
    reader = Reader(git_dir=a.git_dir, tag=a.tag, src_root=a.src_root)
    commit = a.commit or reader.commit()

    serve = serve_options(reader)
    llm, _ = class_fields(reader, LLM_ARGS, "TorchLlmArgs")
    if not llm:
        sys.exit(f"{LLM_ARGS}: no TorchLlmArgs")
    sections = [("trtllm-serve", serve), ("llm_api", llm)]
    mtp_type = None
    for section, classes in [("kv_cache_config", ["KvCacheConfig"]),
                             ("cuda_graph_config", ["CudaGraphConfigType", "CudaGraphConfig"]),
                             ("speculative_config MTP", ["MTPDecodingConfig"])]:
        for cls in classes:
            f, extra = class_fields(reader, LLM_ARGS, cls)
            if f:
                break
        if not f:
            print(f"warning: {cls} not found in {LLM_ARGS} (or what it imports)", file=sys.stderr)
        if cls == "MTPDecodingConfig":
            mtp_type = extra.get("decoding_type")
        sections.append((section, f))
    sections.append(("benchmark_serving", bench_options(reader)))

    out = [f"# repository: {REPO}",
           f"# tag: {a.tag}",
           f"# commit: {commit}",
           "# files: " + " ".join(reader.read_paths)]
    for path in reader.read_paths:
        if path in file_commits:
            out.append(f"# {path}: {file_commits[path]}")
    unread = sorted(set(file_commits) - set(reader.read_paths))
    if unread:
        sys.exit("--file-commit names files the generator did not read: " + " ".join(unread))
    out += [f"# speculative_config MTP decoding_type: {mtp_type}",
            "# generator: emit/sources/trtllm_args.py"]
    for section, names in sections:
        out.append(f"[{section}]")
        out += sorted(names)
    print("\n".join(out))
    if reader.missing:
        print("not in the tree (imports not followed): " + " ".join(sorted(reader.missing)), file=sys.stderr)


if __name__ == "__main__":
    main()
