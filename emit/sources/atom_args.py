#!/usr/bin/env python3
"""Generator: the command-line options accepted by AMD's ATOM server
(`python -m atom.entrypoints.openai_server`) and its benchmark client
(`python -m atom.benchmarks.benchmark_serving`), plus the accepted values of
--kv_cache_dtype and --method, for one ATOM release.

Method (static, Python `ast`, stdlib only; nothing of ATOM is imported):
  openai_server  atom/entrypoints/openai_server.py imports main from
                 atom/entrypoints/openai/api_server.py (unless ATOMESH entry points are
                 switched on by an environment variable: not the default), whose main()
                 calls EngineArgs.add_cli_args(parser) (atom/model_engine/arg_utils.py) and
                 adds its own options. Every string positional argument starting with "-"
                 of an add_argument call in EngineArgs.add_cli_args and in main() is an option
                 string; action=argparse.BooleanOptionalAction also registers "--no-<x>".
  benchmark_serving  every add_argument call in the `if __name__ == "__main__":` block of
                 atom/benchmarks/benchmark_serving.py (argument groups included).
  [kv_cache_dtype], [method]: the `choices=` of those options in EngineArgs.add_cli_args.
  argparse adds -h/--help to every parser; they are listed.

Usage: atom_args.py --git-dir DIR --tag TAG [-o FILE]   (a git dir of ROCm/ATOM)
"""
import argparse
import ast
import subprocess
import sys

SERVER_FILES = ("atom/model_engine/arg_utils.py", "atom/entrypoints/openai/api_server.py")
BENCH_FILE = "atom/benchmarks/benchmark_serving.py"


def show(git_dir, tag, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"], check=True, capture_output=True, text=True).stdout


def options_in(node):
    """Option strings and choices of every add_argument call under node."""
    opts, choices = set(), {}
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
        opts.update(names)
        for kw in call.keywords:
            if kw.arg == "action" and isinstance(kw.value, ast.Attribute) and kw.value.attr == "BooleanOptionalAction":
                opts.update("--no-" + n[2:] for n in names if n.startswith("--"))
            if kw.arg == "choices" and isinstance(kw.value, (ast.List, ast.Tuple)):
                for n in names:
                    choices[n] = [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
    return opts, choices


def function(tree, name, cls=None):
    for node in ast.walk(tree):
        if cls and isinstance(node, ast.ClassDef) and node.name == cls:
            return function(node, name)
        if not cls and isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SystemExit(f"{cls + '.' if cls else ''}{name} not found")


def main_block(tree):
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return node
    raise SystemExit("no __main__ block")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("-o")
    a = ap.parse_args()
    commit = subprocess.run(["git", "--git-dir", a.git_dir, "rev-list", "-n1", a.tag], check=True, capture_output=True, text=True).stdout.strip()
    shim = show(a.git_dir, a.tag, "atom/entrypoints/openai_server.py")
    if "from atom.entrypoints.openai.api_server import main" not in shim:
        raise SystemExit("openai_server.py no longer imports api_server.main: read it again")
    engine, choices = options_in(function(ast.parse(show(a.git_dir, a.tag, SERVER_FILES[0])), "add_cli_args", cls="EngineArgs"))
    server, _ = options_in(function(ast.parse(show(a.git_dir, a.tag, SERVER_FILES[1])), "main"))
    bench, _ = options_in(main_block(ast.parse(show(a.git_dir, a.tag, BENCH_FILE))))
    lines = ["# repository: ROCm/ATOM", f"# tag: {a.tag}", f"# commit: {commit}",
             "# files read: atom/entrypoints/openai_server.py " + " ".join(SERVER_FILES) + " " + BENCH_FILE,
             "# generator: emit/sources/atom_args.py (static ast reading; see its docstring)", "[openai_server]"]
    lines += sorted(engine | server | {"-h", "--help"})
    lines += ["[benchmark_serving]"] + sorted(bench | {"-h", "--help"})
    for opt in ("--kv_cache_dtype", "--method"):
        lines += [f"[{opt[2:]}]"] + sorted(choices.get(opt, []))
    out = "\n".join(lines) + "\n"
    if a.o:
        open(a.o, "w").write(out)
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
