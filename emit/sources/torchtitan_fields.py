#!/usr/bin/env python3
"""Generator: the torchtitan config names a Python config module written by mrep may use.

Reference: pytorch/torchtitan main at b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21),
the first source mrep checked where a run is a Python function returning Trainer.Config
(torchtitan/config/README.md) instead of a TOML job file (v0.2.2 and before).

Method (static, Python `ast`; nothing of torchtitan is imported):
  1. torchtitan/config/configs.py: the annotated fields of the dataclasses ParallelismConfig,
     TrainingConfig and CompileConfig, as `[parallelism] name`, `[training] name`,
     `[compile] name`, and the Literal values a str field accepts (`value` lines).
  2. torchtitan/trainer.py: the fields of Trainer.Config (`[trainer] name`).
  3. torchtitan/distributed/activation_checkpoint.py: the classes with a nested Config
     (`[activation_checkpoint] FullAC`, ...); torchtitan/components/quantization/*.py: the
     converter classes (`[quantization] Float8LinearConverter`, ...) and their Config fields,
     QuantizationConverter.Config's (their base, in __init__.py) included, with Literal values.
  4. torchtitan/models/<family>/config_registry.py: every module-level function
     (`[registry] llama3.llama3_8b`), and `model_registry` in torchtitan/models/<family>/__init__.py.

Usage: torchtitan_fields.py GIT_DIR COMMIT > emit/testdata/torchtitan_<short>.txt
"""
import ast
import subprocess
import sys


def show(git, commit, path):
    return subprocess.run(["git", "-C", git, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout


def ls(git, commit, path):
    out = subprocess.run(["git", "-C", git, "ls-tree", "--name-only", f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout
    return out.split()


def fields(cls):
    out = []
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            lits = []
            for sub in ast.walk(node.annotation):
                if isinstance(sub, ast.Subscript) and getattr(sub.value, "id", "") == "Literal":
                    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
                    lits += [e.value for e in elts if isinstance(e, ast.Constant)]
            out.append((node.target.id, lits))
    return out


def find(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"no class {name}")


def main(git, commit):
    lines = [f"# pytorch/torchtitan {commit}: the names a Python config module may use (emit/sources/torchtitan_fields.py)"]
    configs = ast.parse(show(git, commit, "torchtitan/config/configs.py"))
    for section, cls in [("parallelism", "ParallelismConfig"), ("training", "TrainingConfig"), ("compile", "CompileConfig")]:
        for name, lits in fields(find(configs, cls)):
            lines.append(f"[{section}] {name}")
            lines += [f"[{section}] {name} = {v!r}" for v in lits]
    trainer = ast.parse(show(git, commit, "torchtitan/trainer.py"))
    config = next(n for n in find(trainer, "Trainer").body if isinstance(n, ast.ClassDef) and n.name == "Config")
    lines += [f"[trainer] {name}" for name, _ in fields(config)]
    ac = ast.parse(show(git, commit, "torchtitan/distributed/activation_checkpoint.py"))
    for node in ac.body:
        if isinstance(node, ast.ClassDef) and any(isinstance(n, ast.ClassDef) and n.name == "Config" for n in node.body):
            lines.append(f"[activation_checkpoint] {node.name}")
    # every converter's Config also has QuantizationConverter.Config's fields (its base)
    base = ast.parse(show(git, commit, "torchtitan/components/quantization/__init__.py"))
    qc = next(n for n in find(base, "QuantizationConverter").body if isinstance(n, ast.ClassDef) and n.name == "Config")
    inherited = [name for name, _ in fields(qc)]
    for f in ls(git, commit, "torchtitan/components/quantization"):
        if not f.endswith(".py") or f.startswith("_"):
            continue
        tree = ast.parse(show(git, commit, f"torchtitan/components/quantization/{f}"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Converter"):
                cfg = [n for n in node.body if isinstance(n, ast.ClassDef) and n.name == "Config"]
                lines.append(f"[quantization] {node.name}")
                lines += [f"[quantization] {node.name}.{name}" for name in inherited]
                for c in cfg:
                    lines += [f"[quantization] {node.name}.{name}" for name, lits in fields(c)]
                    lines += [f"[quantization] {node.name}.{name} = {v!r}" for name, lits in fields(c) for v in lits]
    for family in ls(git, commit, "torchtitan/models"):
        try:
            reg = ast.parse(show(git, commit, f"torchtitan/models/{family}/config_registry.py"))
        except subprocess.CalledProcessError:
            continue
        lines += [f"[registry] {family}.{n.name}" for n in reg.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
        init = ast.parse(show(git, commit, f"torchtitan/models/{family}/__init__.py"))
        if any(isinstance(n, ast.FunctionDef) and n.name == "model_registry" for n in init.body):
            lines.append(f"[model_registry] {family}")
    print("\n".join(lines[:1] + sorted(set(lines[1:]))))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
