package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plan serve answers the sizing question end to end: JSON that parses, the markdown page with
// its Pareto chart (a real PNG), and cost inputs shown with their source.
func TestPlanServe(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-70B-Instruct.json.gz")
	var plan struct {
		Mode string `json:"mode"`
		Best []struct {
			GPUs       int64   `json:"gpus"`
			TP         int64   `json:"tp"`
			USD        float64 `json:"usd_per_1m_output_tokens"`
			PerReplica struct {
				TPOT float64 `json:"tpot"`
			} `json:"per_replica"`
		} `json:"best"`
	}
	out := mustRun(t, db, "plan", "serve", "latest", "--chip", "H100", "--isl", "2000", "--osl", "500", "--users", "100", "--tpot", "50ms", "--dtype", "fp8", "--price", "H100=2", "--json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Mode != "users" || len(plan.Best) == 0 {
		t.Fatalf("plan json: %v\n%.500s", err, out)
	}
	for _, b := range plan.Best {
		if b.PerReplica.TPOT > 0.05 || b.USD <= 0 {
			t.Errorf("answer misses the SLO or has no cost: %+v", b)
		}
	}
	dir := filepath.Join(t.TempDir(), "serve")
	md := mustRun(t, db, "plan", "serve", "latest", "--chip", "H100", "--chip", "H200", "--isl", "2000", "--osl", "500", "--tpot", "50ms", "--gpus", "8", "--dtype", "fp8", "-o", dir)
	for _, want := range []string{"# Serving Llama-3.1-70B-Instruct", "Pareto front", "H200", "per GPU-hour from Mercatus", "node share"} {
		if !strings.Contains(md, want) {
			t.Errorf("plan serve output lacks %q:\n%.1500s", want, md)
		}
	}
	f, err := os.Open(filepath.Join(dir, "serve.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() != 1100 {
		t.Errorf("serve.png: %v", err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "serve.md"))
	if err != nil || !strings.Contains(string(page), "](serve.png)") {
		t.Errorf("serve.md: %v", err)
	}
}

// Several chips chart as chips, one as its layouts, either on request; anything else is refused
// before a file is written.
func TestPlanServeChartKinds(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--chip", "H100", "--chip", "H200", "--chip", "B200"}, 0},
		{[]string{"--chip", "H100", "--chart", "chips"}, 0},
		{[]string{"--chip", "H100", "--chip", "H200", "--chart", "layouts"}, 0},
		{[]string{"--chip", "H100", "--chart", "pie"}, exitUsage},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		args := append([]string{"plan", "serve", "Llama-3.1-8B", "--tpot", "50ms", "--top", "2", "-o", dir}, c.args...)
		_, stderr, err := run(t, db, args...)
		if exitCode(err) != c.code {
			t.Errorf("%v: exit %d (%s), want %d", c.args, exitCode(err), stderr, c.code)
			continue
		}
		f, ferr := os.Open(filepath.Join(dir, "serve.png"))
		if c.code != 0 {
			if ferr == nil || !strings.Contains(err.Error(), `--chart "pie": want chips or layouts`) {
				t.Errorf("--chart pie: wrote serve.png or said %v", err)
			}
			continue
		}
		if ferr != nil {
			t.Fatal(ferr)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() != 1100 {
			t.Errorf("%v: serve.png %v", c.args, err)
		}
	}
}

// Bad input is refused naming the value, and an impossible SLO exits non-zero saying why.
func TestPlanServeRefuses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-8B.json.gz")
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("isl,osl\n100,10\n100,-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good.csv")
	if err := os.WriteFile(good, []byte("isl,osl,count\n1000,100,3\n3000,300,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, db, "plan", "serve", "Llama-3.1-8B", "--workload", good, "--prefix-hit", "0.5", "--top", "1")
	if !strings.HasPrefix(out, "# Serving Llama-3.1-8B: 1500-token prompts, 150-token outputs") || !strings.Contains(out, "4 requests, mean ISL 1500") || !strings.Contains(out, "50% of each prompt") {
		t.Errorf("workload means (by hand 1500/150) or prefix hit missing:\n%.800s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--isl", "0"}, "--isl 0"},
		{[]string{"--osl", "-5"}, "--osl -5"},
		{[]string{"--rate", "-1"}, "--rate -1"},
		{[]string{"--users", "0"}, "--users 0"},
		{[]string{"--users", "5", "--rate", "1"}, "not both"},
		{[]string{"--tpot", "50 parsecs"}, `--tpot "50 parsecs"`},
		{[]string{"--ttft", "1"}, `--ttft "1"`},
		{[]string{"--price", "Z80=1"}, `--price "Z80=1"`},
		{[]string{"--price", "H100=cheap"}, `--price "H100=cheap"`},
		{[]string{"--dtype", "fp7"}, `--dtype "fp7"`},
		{[]string{"--kv-fraction", "1.5"}, "--kv-fraction 1.5"},
		{[]string{"--tpot", "1ms"}, "TPOT >="},
		{[]string{"--prefix-hit", "1"}, "--prefix-hit 1"},
		{[]string{"--kv-block", "-16"}, "--kv-block -16"},
		{[]string{"--workload", bad}, "bad.csv:3: osl -3"},
		{[]string{"--workload", good, "--isl", "5"}, "not both"},
	} {
		_, _, err := run(t, db, append([]string{"plan", "serve", "Llama-3.1-8B"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan serve %v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// The README's serving answers are real output: each console block between the
// plan-serve-examples markers is the head of what its command prints today.
func TestREADMEServeExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	db := filepath.Join(t.TempDir(), "r.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-70B-Instruct.json.gz", "../../examples/dumps/Llama-3.1-8B.json.gz",
		"../../examples/dumps/Mixtral-8x7B-v0.1.json.gz", "../../examples/dumps/DeepSeek-V3.json.gz")
	// every marked section: the first page's (zoo name, config.json) and the serving examples'
	var blocks []string
	for rest := s; ; {
		start := strings.Index(rest, "<!-- plan-serve-examples")
		end := strings.Index(rest, "<!-- /plan-serve-examples -->")
		if start < 0 || end < start {
			break
		}
		blocks = append(blocks, strings.Split(rest[start:end], "```console\n")[1:]...)
		rest = rest[end+len("<!-- /plan-serve-examples -->"):]
	}
	if len(blocks) < 6 {
		t.Fatalf("%d examples, want the first page's 2 and the issue's 4 questions (and more)", len(blocks))
	}
	for _, raw := range blocks {
		b := consoleBlock(t, raw)
		out := mustRun(t, db, readmeArgs(strings.Fields(b.args))...)
		if *update {
			// the head: through the end of the best-deployments table (the prose around the
			// blocks is read again by hand)
			s = strings.Replace(s, b.text, b.cmd+"\n"+planHead(out), 1)
			continue
		}
		if !strings.HasPrefix(out, b.want) {
			t.Errorf("README block for %q is stale (go test ./cmd/mrep -run READMEServe -update); the command now prints:\n%s", b.args, out)
		}
	}
	if *update {
		if err := os.WriteFile("../../README.md", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// plan train --tokens costs the run on the best layout: GPU-hours are tokens over the layout's
// throughput times its GPUs (by hand from the JSON), dollars at the --price given.
func TestPlanTrainCost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-70B-Instruct.json.gz")
	var out struct {
		Top []struct {
			Step struct {
				TokensPerS float64 `json:"tokens_per_s"`
			} `json:"step"`
		} `json:"top"`
		Cost struct {
			GPUs     int64   `json:"gpus"`
			GPUHours float64 `json:"gpu_hours"`
			USD      float64 `json:"usd"`
			MWh      float64 `json:"mwh"`
		} `json:"cost"`
	}
	js := mustRun(t, db, "plan", "train", "latest", "--gpus", "64", "--gbs", "128", "--seq", "8192", "--tokens", "1e12", "--price", "H100=2", "--json")
	if err := json.Unmarshal([]byte(js), &out); err != nil || len(out.Top) == 0 {
		t.Fatalf("plan json: %v", err)
	}
	want := 1e12 / out.Top[0].Step.TokensPerS * 64 / 3600
	if out.Cost.GPUs != 64 || math.Abs(out.Cost.GPUHours-want) > 1e-9*want || math.Abs(out.Cost.USD-2*want) > 1e-9*want {
		t.Errorf("cost %+v, want %g GPU-hours and $%g", out.Cost, want, 2*want)
	}
	// energy between the idle floor and TDP plus the node share, per GPU-hour
	if lo, hi := want*84/1e6, want*(700+575)/1e6; out.Cost.MWh < lo || out.Cost.MWh > hi {
		t.Errorf("%g MWh outside [%g, %g]", out.Cost.MWh, lo, hi)
	}
	md := mustRun(t, db, "plan", "train", "latest", "--gpus", "64", "--gbs", "128", "--seq", "8192", "--tokens", "1e12")
	if !strings.Contains(md, "## Training run of 1e+12 tokens on the best layout (estimate)") || !strings.Contains(md, "price from Mercatus") {
		t.Errorf("cost section missing:\n%s", md[max(0, len(md)-1200):])
	}
	for _, bad := range [][]string{{"--tokens", "-5"}, {"--price", "H100=-1"}, {"--price", "nochip=1"}} {
		_, _, err := run(t, db, append([]string{"plan", "train", "latest", "--gpus", "64", "--gbs", "128"}, bad...)...)
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// planHead is a plan's output through the end of its best-deployments table: what the README
// shows of it.
func planHead(out string) string {
	if i := strings.Index(out, "\n| 1 |"); i >= 0 {
		if j := strings.Index(out[i:], "\n\n"); j >= 0 {
			return out[:i+j+1]
		}
	}
	return out
}

// readmeBlock is one console block of the README: its text up to the closing fence, the
// command line, the command's mrep arguments and the output shown under it.
type readmeBlock struct{ text, cmd, args, want string }

// consoleBlock reads a console block from just after its opening fence.
func consoleBlock(t *testing.T, raw string) readmeBlock {
	t.Helper()
	text := raw[:strings.Index(raw, "```")]
	cmd, want, _ := strings.Cut(text, "\n")
	args, ok := strings.CutPrefix(cmd, "$ mrep ")
	if !ok {
		t.Fatalf("README block does not start with a command: %q", cmd)
	}
	return readmeBlock{text, cmd, args, want}
}

// readmeArgs runs a README command from this package's directory: paths into the repository
// (examples/...) are taken from its root.
func readmeArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "examples/") {
			a = "../../" + a
		}
		out[i] = a
	}
	return out
}
