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
}

// Releases are, per program, the releases mrep writes for, the default (newest checked) first.
var Releases = map[string][]Release{
	"megatron": {{Name: "d98e8a6", Source: "NVIDIA/Megatron-LM main d98e8a64ddf34856e74b24714e3bedb2f5a39553 (megatron/training/arguments.py)", Table: "megatron_args_d98e8a6.txt"}},
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
