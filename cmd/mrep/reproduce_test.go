package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Each plan's printed analyze command, split by a real shell and run as printed, times the
// winning layout to the same step time and memory and gives the same verdict: for a dense, an
// MoE, a LoRA (glob targets that need quoting), an FP16 and an FP8-recipe plan (issue 31: the
// FP16 plan printed bf16 flags, the LoRA plan dropped --lora-rank and the command said "does
// NOT fit, 206.0 GiB" where the plan said it fits).
func TestPrintedCommandsReproduce(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to split the printed command")
	}
	db := filepath.Join(t.TempDir(), "r.db")
	for _, tc := range []struct {
		name string
		args []string
		want []string // words the printed command must carry
	}{
		{"dense", []string{"Llama-3.1-8B", "--gpus", "8", "--gbs", "64"}, nil},
		{"MoE", []string{"Qwen3-30B-A3B", "--gpus", "16", "--gbs", "128", "--try-dispatcher", "deepep"}, []string{"--ep"}},
		{"LoRA", []string{"Llama-3.1-70B", "--gpus", "8", "--gbs", "64", "--lora-rank", "16", "--lora-targets", "*q_proj", "--lora-targets", "*v_proj", "--freeze", "model.embed_tokens"},
			[]string{"--lora-rank", "16", "'*q_proj'", "'*v_proj'", "--freeze"}},
		{"QLoRA", []string{"Llama-3.1-8B", "--gpus", "1", "--gbs", "8", "--seq", "4096", "--lora-rank", "8", "--qlora", "--optimizer", "adam8bit"}, []string{"--qlora", "--optimizer", "adam8bit"}},
		{"FP16", []string{"Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--dtype", "fp16", "--framework", "fsdp"}, []string{"--dtype", "fp16", "--framework", "fsdp"}},
		{"FP8", []string{"Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--dtype", "fp8", "--recipe", "fp8-cs"}, []string{"--recipe", "fp8-cs", "--weight-dtype", "bf16"}},
		// DeepSeek-V3's 61 layers split over 16 stages only unevenly (Megatron's
		// --decoder-first-pipeline-num-layers 1): the command carries the split, which it lacked
		// (analyze timed an even split, 28.1 s where the plan said 20.5)
		{"uneven split", []string{"DeepSeek-V3", "--chip", "H800", "--gpus", "2048", "--seq", "4096", "--gbs", "15360", "--dtype", "fp8", "--recipe", "fp8-blockwise",
			"--mtp", "1", "--try-a2a-overlap", "dualpipe", "--try-dispatcher", "deepep"}, []string{"--first-stage-layers", "1", "--a2a-overlap", "dualpipe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var plan struct {
				Top []struct {
					Step struct {
						StepTime float64 `json:"step_time"`
					} `json:"step"`
					Memory struct {
						Total float64 `json:"total"`
					} `json:"memory"`
					Fit struct {
						Verdict string `json:"verdict"`
					} `json:"fit"`
					Analyze string `json:"analyze"`
				} `json:"top"`
			}
			args := append(append([]string{"plan", "train"}, tc.args...), "--top", "1", "--json")
			if err := json.Unmarshal([]byte(mustRun(t, db, args...)), &plan); err != nil || len(plan.Top) == 0 {
				t.Fatalf("plan train %v: %v (%d layouts)", tc.args, err, len(plan.Top))
			}
			best := plan.Top[0]
			// the words as a shell reads them, NUL-separated
			out, err := exec.Command(sh, "-c", "printf '%s\\0' "+strings.TrimPrefix(best.Analyze, "mrep ")).Output()
			if err != nil {
				t.Fatalf("sh cannot read %s: %v", best.Analyze, err)
			}
			words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			for _, w := range tc.want {
				if !strings.Contains(" "+best.Analyze+" ", " "+w+" ") {
					t.Errorf("the printed command lacks %s: %s", w, best.Analyze)
				}
			}
			app := NewApp(Env{Now: fixedClock, Who: testWho})
			var stdout, stderr bytes.Buffer
			app.Writer, app.ErrWriter = &stdout, &stderr
			app.ExitErrHandler = func(*cli.Context, error) {}
			argv := append(append([]string{"mrep", "--db", db}, words...), "--json")
			if err := app.RunContext(context.Background(), interspersed(app, argv)); err != nil {
				t.Fatalf("%s: %v\n%s", best.Analyze, err, stderr.String())
			}
			var got struct {
				Layouts []struct {
					Step struct {
						StepTime float64 `json:"step_time"`
					} `json:"step"`
					Fit struct {
						Verdict string `json:"verdict"`
						Memory  struct {
							Total float64 `json:"total"`
						} `json:"memory_per_gpu"`
					} `json:"memory"`
				} `json:"training_layout"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.Layouts) != 1 {
				t.Fatalf("%s: %v (%d layouts)", best.Analyze, err, len(got.Layouts))
			}
			g := got.Layouts[0]
			if math.Abs(g.Step.StepTime/best.Step.StepTime-1) > 1e-9 || math.Abs(g.Fit.Memory.Total/best.Memory.Total-1) > 1e-9 || g.Fit.Verdict != best.Fit.Verdict {
				t.Errorf("%s\n  gives %.6g s, %.4g GiB, %q; the plan said %.6g s, %.4g GiB, %q", best.Analyze,
					g.Step.StepTime, g.Fit.Memory.Total/(1<<30), g.Fit.Verdict, best.Step.StepTime, best.Memory.Total/(1<<30), best.Fit.Verdict)
			}
		})
	}
}

// plan serve's printed command, split by a real shell and run, plans the same deployments: for
// a dense model on two chips with an SLO, an MoE under vLLM in FP8 with a prefix cache, a
// workload file and speculative decoding.
func TestPrintedServeCommandsReproduce(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to split the printed command")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	wl := filepath.Join(dir, "mix of prompts.csv") // a path that needs quoting
	if err := os.WriteFile(wl, []byte("isl,osl,count\n1000,200,3\n4000,500,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"Llama-3.1-8B", "--chip", "H100", "--chip", "H200", "--users", "40", "--tpot", "30ms"},
		{"Qwen3-30B-A3B", "--engine", "vllm", "--dtype", "fp8", "--rate", "2.5", "--prefix-hit", "0.3", "--max-gpus", "4"},
		{"Llama-3.1-70B", "--workload", wl, "--spec-tokens", "2", "--spec-accept", "0.6", "--users", "16", "--top", "3"},
	} {
		var plan struct {
			Best    json.RawMessage `json:"best"`
			Command string          `json:"command"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, db, append(append([]string{"plan", "serve"}, args...), "--json")...)), &plan); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sh, "-c", "printf '%s\\0' "+strings.TrimPrefix(plan.Command, "mrep ")).Output()
		if err != nil {
			t.Fatalf("sh cannot read %s: %v", plan.Command, err)
		}
		words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		var again struct {
			Best json.RawMessage `json:"best"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, db, append(words, "--json")...)), &again); err != nil {
			t.Fatalf("%s: %v", plan.Command, err)
		}
		if len(plan.Best) < 10 || !bytes.Equal(plan.Best, again.Best) {
			t.Errorf("%s plans other deployments than %v", plan.Command, args)
		}
	}
}
