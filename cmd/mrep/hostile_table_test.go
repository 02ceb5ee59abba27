package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// hostileCase is one hostile input: the command that reads it, the exit code and the words
// of the message it must give, against a database that must come out byte for byte as it
// went in.
type hostileCase struct {
	file string   // under testdata/hostile (written by gen.go); "" for flag-only cases
	args []string // FILE stands for the file's path
	exit int
	want string
}

var hostileCases = []hostileCase{
	// rows files (validate and calibrate read them alike)
	{"rows_impossible.csv", []string{"validate", "FILE", "--no-loo"}, exitFailure, "row fast (Llama-2-7b on H100-SXM): measured 3.6e-05 s is below the ideal roofline's"},
	{"rows_impossible.csv", []string{"calibrate", "FILE", "--fit", "gemm_frac"}, exitFailure, "1 row measures a run faster than physics allows"},
	{"rows_negative.csv", []string{"validate", "FILE"}, exitFailure, `line 2 (id "neg"): measured must be a positive number`},
	{"rows_nan.csv", []string{"validate", "FILE"}, exitFailure, `line 2: measured "NaN" is not a finite number`},
	{"rows_inf.csv", []string{"calibrate", "FILE"}, exitFailure, `line 2: measured "1e400" is not a finite number`},
	{"rows_huge_tp.csv", []string{"validate", "FILE"}, exitFailure, "row tp: sizes beyond physical range: tp, ep and cp at most 1048576"},
	{"rows_unknown_column.csv", []string{"validate", "FILE"}, exitFailure, `line 1: unknown column "tensor_parallel"`},
	{"rows_duplicate_id.csv", []string{"validate", "FILE"}, exitFailure, `line 3: duplicate id "a"`},
	{"rows_wrong_unit.csv", []string{"validate", "FILE"}, exitFailure, `line 2 (id "u"): unit "tok/s": a ttft row is measured in "s"`},
	{"rows_unknown_chip.csv", []string{"validate", "FILE"}, exitFailure, `row c: chip "H900"`},
	{"rows_unknown_field.json", []string{"validate", "FILE"}, exitFailure, `/rows/0: json: unknown field "tensor_parallel"`},
	{"rows_fraction_tp.json", []string{"calibrate", "FILE"}, exitFailure, "/0: json: cannot unmarshal number 1.5"},
	{"rows_measured_huge.csv", []string{"validate", "FILE"}, exitFailure, `line 2 (id "big"): measured 1e+12 s: more than 1e+06 s, not a run's measurement`},
	{"rows_tp_over_gpus.csv", []string{"validate", "FILE"}, exitFailure, `line 2 (id "g"): gpus 1: fewer than tp x pp x cp = 8`},
	{"rows_duplicate_key.json", []string{"validate", "FILE"}, exitFailure, `/0: key "measured" given twice`},
	{"rows_duplicate_column.csv", []string{"calibrate", "FILE"}, exitFailure, `line 1: column "measured" given twice`},

	// workloads
	{"workload_zero_isl.csv", []string{"plan", "serve", "Llama-3.1-8B", "--workload", "FILE"}, exitFailure, ":2: isl 0 must be a whole number of tokens from 1 to 16,777,216"},
	{"workload_fraction.csv", []string{"plan", "serve", "Llama-3.1-8B", "--workload", "FILE"}, exitFailure, ":2: isl 512.5 must be a whole number"},
	{"workload_huge.csv", []string{"plan", "serve", "Llama-3.1-8B", "--workload", "FILE"}, exitFailure, ":2: isl 1000000000 must be a whole number"},
	{"workload_nan_count.csv", []string{"plan", "serve", "Llama-3.1-8B", "--workload", "FILE"}, exitFailure, ":2: count NaN must be positive"},
	{"workload_fields.csv", []string{"plan", "serve", "Llama-3.1-8B", "--workload", "FILE"}, exitFailure, ":2: want isl,osl or isl,osl,count, got 4 fields"},
	{"workload_empty.csv", []string{"plan", "serve", "Llama-3.1-8B", "--workload", "FILE"}, exitFailure, ": no requests"},

	// chips files
	{"chips_negative_tdp.json", []string{"--chips-file", "FILE", "chips"}, exitFailure, "/chips/0: X1: tdp_w -700 is outside the physical range (0, 100000]"},
	{"chips_huge_peak.json", []string{"--chips-file", "FILE", "analyze", "gpt2"}, exitFailure, "peak_tflops.bf16 1e+300 is outside the physical range"},
	{"chips_huge_hbm.json", []string{"--chips-file", "FILE", "plan", "serve", "gpt2"}, exitFailure, "hbm_gbps 1e+300 is outside the physical range"},
	{"chips_zero_memory.json", []string{"--chips-file", "FILE", "chips"}, exitFailure, "hbm_gbps, memory_gib and scale_up_gbps must be positive"},
	{"chips_string_peak.json", []string{"--chips-file", "FILE", "chips"}, exitFailure, "cannot unmarshal string into Go struct field Chip.chips.peak_tflops"},
	{"chips_unknown_field.json", []string{"--chips-file", "FILE", "chips"}, exitFailure, `unknown field "tdp_watts"`},
	{"chips_truncated.json", []string{"--chips-file", "FILE", "chips"}, exitFailure, "unexpected EOF"},
	{"chips_script_name.json", []string{"--chips-file", "FILE", "chips"}, exitFailure, `name "<script>alert(1)</script>": a chip's name is letters, digits`},

	// dumps
	{"dump_lone_surrogate.json", []string{"ingest", "FILE"}, exitFailure, `at /modules/1/name: a string holds a lone UTF-16 surrogate (\ud800)`},
	{"dump_nul_name.json", []string{"ingest", "FILE"}, exitFailure, `at /modules/1/name: a string holds a NUL character (\u0000)`},
	{"dump_nan_numel.json", []string{"ingest", "FILE"}, exitFailure, "invalid JSON at line 1, column"},
	{"dump_negative_numel.json", []string{"ingest", "FILE"}, exitFailure, "at /modules/7/params/0/numel: schema: must be >= 0 but found -768"},
	{"dump_stale_hash.json", []string{"ingest", "FILE"}, exitFailure, "at /run/content_hash: does not match the dump's content"},
	{"dump_wrong_version.json", []string{"ingest", "FILE"}, exitFailure, "at /schema_version: schema_version 99 is not supported"},
	{"dump_lone_surrogate.json", []string{"analyze", "FILE"}, exitFailure, "lone UTF-16 surrogate"},

	// flags
	{"", []string{"analyze", "Mixtral-8x7B", "--set", "num_local_experts=0"}, exitUsage, "want at least 1"},
	{"", []string{"analyze", "Mixtral-8x7B", "--set", "num_local_experts=1e300"}, exitUsage, "want a whole number from 0 to 10,000,000"},
	{"", []string{"analyze", "Mixtral-8x7B", "--set", "num_local_expert=4"}, exitUsage, "did you mean num_local_experts?"},
	// a count given as text would count as nothing (attention at 0 FLOPs); a number as text too
	{"", []string{"analyze", "Qwen3-8B", "--set", "num_attention_heads=abc"}, exitUsage, `--set num_attention_heads="abc": want a whole number`},
	{"", []string{"analyze", "Qwen3-8B", "--set", "rms_norm_eps=tiny"}, exitUsage, `--set rms_norm_eps="tiny": want a number`},
	// loads and limits beyond what a planner can mean (issue 37's lower-harm list; plan serve's
	// option errors exit 1, as its others do)
	{"", []string{"plan", "serve", "Qwen3-8B", "--users", "1e-9"}, exitFailure, "--users 1e-09: want 1 to 1e+07 concurrent users"},
	{"", []string{"plan", "serve", "Qwen3-8B", "--users", "1e300"}, exitFailure, "--users 1e+300: want 1 to 1e+07"},
	{"", []string{"plan", "serve", "Qwen3-8B", "--rate", "1e12"}, exitFailure, "--rate 1e+12: want at most 1e+06 requests/s"},
	{"", []string{"plan", "serve", "Qwen3-8B", "--gpus", "8", "--max-gpus", "4"}, exitFailure, "--gpus 8: more than --max-gpus 4"},
	{"", []string{"plan", "serve", "Qwen3-8B", "--kv-fraction", "1e-9"}, exitFailure, "--kv-fraction 1e-09: must be in [0.05, 1]"},
	{"", []string{"plan", "serve", "Qwen3-8B", "--top", "-1"}, exitFailure, "--top -1: want 0 (the default) or more"},
	{"", []string{"plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--top", "-1"}, exitUsage, "--top -1: want 0 (the default) or more"},
	{"", []string{"plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--seq", "1000000000"}, exitUsage, "--seq 1000000000: want at most 16777216 tokens"},
	{"", []string{"calibrate", "--lanes", "--rows", "bench-serve"}, exitUsage, "calibrate --lanes: no training rows"},
	{"", []string{"plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--tokens", "1e30"}, exitUsage, "--tokens"},
	{"", []string{"--read-only", "rm", "1"}, exitUsage, "--read-only forbids it"},
	{"", []string{"--read-only", "ingest", "testdata/hostile/dump_stale_hash.json"}, exitUsage, "--read-only forbids it"},
	{"", []string{"show", "model:nosuch"}, exitFailure, "no such run"},
	// contradictory flags: a recipe the chip has no instructions for, EP on a dense model
	{"", []string{"analyze", "Llama-3.1-8B", "--chip", "H100", "--dtype", "fp8", "--recipe", "nvfp4"}, exitUsage, "--recipe nvfp4: NVFP4 GEMMs need NVIDIA Blackwell FP4 tensor cores, and H100-SXM has none"},
	{"", []string{"plan", "train", "Llama-3.1-8B", "--chip", "H100", "--gpus", "8", "--gbs", "64", "--dtype", "fp8", "--recipe", "mxfp8"}, exitUsage, "--recipe mxfp8: block-scaled MXFP8 GEMMs need Blackwell or CDNA4"},
	{"", []string{"analyze", "Llama-3.1-8B", "--chip", "H100", "--ep", "8"}, exitUsage, "--ep 8: ep 8 splits experts, and the model is dense (Llama-3.1-8B has no routed experts)"},
	// a short name that could be several zoo models, and a directory named as a model, say so
	{"", []string{"analyze", "Qwen3"}, exitFailure, `"Qwen3" could be any of`},
	{"", []string{"analyze", "testdata"}, exitFailure, `"testdata" is a directory, not a model`},
}

// Every hostile input gives its message and exit code, and the database is byte for byte as
// it was (nothing half-written, nothing stored).
func TestHostileInputs(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz")
	snapshot := func() []byte {
		var all []byte
		for _, p := range []string{db, db + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	before := snapshot()
	used := map[string]bool{}
	for _, c := range hostileCases {
		args := make([]string, len(c.args))
		for i, a := range c.args {
			if a == "FILE" {
				a = filepath.Join("testdata", "hostile", c.file)
			}
			args[i] = a
		}
		used[c.file] = true
		name := c.file + " " + strings.Join(c.args, " ")
		_, stderr, err := run(t, db, args...)
		if code := exitCode(err); code != c.exit {
			t.Errorf("%s: exit %d, want %d (%v)", name, code, c.exit, err)
			continue
		}
		msg := stderr
		if err != nil {
			msg = err.Error() + "\n" + stderr
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: message %q\nwant %q", name, msg, c.want)
		}
		if c.file != "" && !strings.Contains(msg, c.file) {
			t.Errorf("%s: the message does not name the file: %q", name, msg)
		}
		if after := snapshot(); !bytes.Equal(after, before) {
			t.Fatalf("%s changed the database", name)
		}
	}
	files, _ := filepath.Glob("testdata/hostile/*.*")
	for _, f := range files {
		if b := filepath.Base(f); b != "gen.go" && !used[b] {
			t.Errorf("%s has no case in hostileCases", f)
		}
	}
}

// The committed hostile files are what gen.go writes (edit the script, not the files).
func TestHostileFilesAreGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	dir := t.TempDir()
	out, err := exec.Command("go", "run", "./testdata/hostile/gen.go", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen.go: %v\n%s", err, out)
	}
	gen, _ := filepath.Glob(filepath.Join(dir, "*"))
	have, _ := filepath.Glob("testdata/hostile/*.*")
	var names []string
	for _, f := range have {
		if filepath.Base(f) != "gen.go" {
			names = append(names, filepath.Base(f))
		}
	}
	sort.Strings(names)
	if len(gen) != len(names) {
		t.Errorf("gen.go writes %d files, testdata/hostile holds %d", len(gen), len(names))
	}
	for _, n := range names {
		a, _ := os.ReadFile(filepath.Join("testdata", "hostile", n))
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("testdata/hostile/%s is not what gen.go writes (run: go run ./testdata/hostile/gen.go testdata/hostile)", n)
		}
	}
}
