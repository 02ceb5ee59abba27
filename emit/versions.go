package emit

import (
	"fmt"
	"strings"
)

// Release is one release of a program that emitted files were checked against: the options and
// fields mrep writes are in the table transcribed from its source (emit/testdata/Table, written
// by the generator in emit/sources), at the commit named.
type Release struct {
	Name   string // as --emit-version takes it
	Source string // repository, tag or branch and commit the table was read from
	Table  string // emit/testdata file of its options and fields
	// MTPMethod is vLLM's --speculative-config method for a model's own MTP heads.
	MTPMethod string
}

func (r Release) mtpMethod() string {
	if r.MTPMethod == "" {
		return "mtp"
	}
	return r.MTPMethod
}

// Releases are, per program, the releases mrep writes for, the default (newest checked) first.
var Releases = map[string][]Release{
	"megatron": {{Name: "d98e8a6", Source: "NVIDIA/Megatron-LM main d98e8a64ddf34856e74b24714e3bedb2f5a39553 (megatron/training/arguments.py)", Table: "megatron_args_d98e8a6.txt"}},
	"vllm": {
		{Name: "0.33.0", Source: "vllm-project/vllm v0.33.0 4ba787ec9 (PyPI sdist of 2026-11-02): vllm/engine/arg_utils.py, vllm/config/*.py, vllm/benchmarks/serve.py", Table: "vllm_v0.33.0.txt", MTPMethod: "mtp"},
		{Name: "0.26.0", Source: "vllm-project/vllm v0.26.0 f2654939e69b4069b13977e9aef3e31d4dcaf051 (PyPI sdist of 2026-07-25)", Table: "vllm_v0.26.0.txt", MTPMethod: "mtp"},
	},
	"trtllm": {{Name: "main-44373a3", Source: "NVIDIA/TensorRT-LLM main 44373a31ee62ab48501d4d14dc2b6ec7f71df403 (tensorrt_llm/commands/serve.py, llmapi/llm_args.py; serve/scripts/benchmark_serving.py at 0228a71): the repository is too large to fetch whole here, so no release tag was read", Table: "trtllm_44373a3.txt"}},
	"sglang": {
		{Name: "0.5.23", Source: "sgl-project/sglang v0.5.23 (PyPI wheel, files of 2026-10-30; the wheel records no commit): python/sglang/srt/server_args.py, arg_groups/, bench_serving", Table: "sglang_v0.5.23.txt"},
		{Name: "0.5.15", Source: "sgl-project/sglang v0.5.15 (PyPI wheel, files of 2026-07-10)", Table: "sglang_v0.5.15.txt"},
	},
	"atom": {{Name: "0.1.5", Source: "ROCm/ATOM v0.1.5 b0071c550ba3c99b1e9218debb91a6f81550da9a (atom/model_engine/arg_utils.py, atom/entrypoints/openai/api_server.py, atom/benchmarks/benchmark_serving.py)", Table: "atom_v0.1.5.txt"}},
	"torchtitan": {
		{Name: "0.3", Source: "pytorch/torchtitan main b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (2026-08-21): a run is a Python function returning Trainer.Config (torchtitan/config/README.md)", Table: "torchtitan_b5bcd76.txt"},
		{Name: "0.2.2", Source: "pytorch/torchtitan v0.2.2 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce: TOML job files (torchtitan/config/job_config.py)"},
	},
}

// ResolveRelease is the release of program that version names ("" or "latest": the newest
// checked), or an error listing the ones known.
func ResolveRelease(program, version string) (Release, error) {
	rs := Releases[program]
	if len(rs) == 0 {
		return Release{}, fmt.Errorf("no releases of %q are known", program)
	}
	if version == "" || version == "latest" {
		return rs[0], nil
	}
	var names []string
	for _, r := range rs {
		if r.Name == version || strings.TrimPrefix(version, "v") == r.Name {
			return r, nil
		}
		names = append(names, r.Name)
	}
	return Release{}, fmt.Errorf("%s %q: mrep writes for %s (the first is the default)", program, version, strings.Join(names, ", "))
}

// atLeast says whether the release is version v or later (dotted numbers compared in turn).
func (r Release) atLeast(v string) bool {
	a, b := strings.Split(r.Name, "."), strings.Split(v, ".")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y int
		if i < len(a) {
			fmt.Sscan(a[i], &x)
		}
		if i < len(b) {
			fmt.Sscan(b[i], &y)
		}
		if x != y {
			return x > y
		}
	}
	return true
}
