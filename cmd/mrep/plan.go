package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/econ"
	"github.com/mrep-dev/mrep/emit"
	"github.com/mrep-dev/mrep/internal/output"
	"github.com/mrep-dev/mrep/internal/shell"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
)

// maxTrainSeq bounds plan train's sequence length (2^24 tokens, the workloads' bound): beyond
// it no layout fits any GPU, and sizing every layout to say so took 17-40 s.
const maxTrainSeq = 1 << 24

// trainPlanOutput is plan train's JSON: the plan's fields, and the run's cost with --tokens.
type trainPlanOutput struct {
	layout.Plan
	Cost *econ.Run `json:"cost,omitempty"`
}

func planCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "search layouts: `plan train` ranks the parallel layouts of a training job on N GPUs; `plan serve` sizes a serving deployment",
		Subcommands: []*cli.Command{{
			Name:      "train",
			Usage:     "rank every TP x PP (x VP) x CP x DP x micro-batch x recompute layout of N GPUs that fits, by step time",
			ArgsUsage: "MODEL  (a zoo name from `mrep models`, a dump or config.json file, or a stored run)",
			Flags: append([]cli.Flag{
				&cli.Int64Flag{Name: "gpus", Required: true, Usage: "GPUs in the job"},
				&cli.Int64Flag{Name: "gbs", Required: true, Usage: "global batch, sequences per optimizer step"},
				&cli.Int64Flag{Name: "seq", Aliases: []string{"s"}, Value: 8192, Usage: "S: training tokens per sequence"},
				&cli.StringFlag{Name: "chip", Value: "H100-SXM", Usage: "`CHIP` as `mrep chips` lists it (its default 8-GPU node)"},
				&cli.StringFlag{Name: "system", Usage: "`SYSTEM` from mrep chips --json (dgx-h100, dgx-h200, dgx-b200, gb200-nvl72, dgx-a100, tpu-v5p-pod, tpu-v6e-256): chip, scale-up domain and links"},
				&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "precision recipe: bf16 or fp8 (FP8 GEMMs, BF16 attention)"},
				&cli.IntFlag{Name: "top", Value: 10, Usage: "layouts to show"},
				&cli.Float64Flag{Name: "tokens", Usage: "cost a training run of this many tokens (e.g. 15e12) on the best layout: days, GPU-hours, $ and MWh"},
				&cli.StringSliceFlag{Name: "price", Usage: "price per GPU-hour, CHIP=USD (overrides the chips database)"},
				&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write plan.md, plan.json and the step-time-against-memory chart (plan.png) to `DIR`"},
				&cli.StringFlag{Name: "emit", Usage: "write the winning layout for `FRAMEWORK` (megatron: Megatron-LM arguments; torchtitan: a Python config module, or a job TOML for 0.2.2) into -o DIR, else print it after the plan"},
				&cli.StringFlag{Name: "emit-version", Usage: "with --emit: the `RELEASE` of the framework or engine to write for (default: the newest mrep checked; one it does not know is refused with the list)"},
				&cli.IntSliceFlag{Name: "zero", Usage: "ZeRO stages to try (default 1, 2 and 3; NeMo's Megatron has 1, the distributed optimizer)"},
				&cli.StringSliceFlag{Name: "try-a2a-overlap", Usage: "MoE: all-to-all schedules to search (none, 1f1b, dualpipe)"},
				&cli.StringSliceFlag{Name: "try-dispatcher", Usage: "MoE: token dispatchers to search (alltoall, deepep)"},
				&cli.BoolFlag{Name: "try-turbo", Usage: "MoE on AMD Instinct: also try each layout on Primus-Turbo's path (--grouped-gemm turbo --sync-free-moe 2 --dispatcher deepep), as Primus runs it"},
				&cli.BoolFlag{Name: "allow-tight", Usage: "rank layouts whose predicted memory is over the GPU's but within the memory model's measured uncertainty among those that fit (by default they rank after every layout under the capacity)"},
			}, trainingFlags()...),
			Action: func(c *cli.Context) error {
				s := analyzer.DefaultScenario()
				if err := s.SetPrecision(analyzer.TrainingPrecision(c.String("dtype"))); err != nil {
					return cli.Exit("--"+err.Error(), exitFailure)
				}
				dt := s.ComputeDType
				db, err := chipDB(c)
				if err != nil {
					return err
				}
				chip, err := db.Lookup(c.String("chip"))
				if sys := c.String("system"); sys != "" {
					_, chip, err = db.System(sys)
				}
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				prices, err := chips.ParsePrices(db, c.StringSlice("price"))
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				if c.IsSet("tokens") && !(c.Float64("tokens") > 0 && c.Float64("tokens") <= 1e18) {
					// beyond 1e18 tokens (60,000 times a 15T-token run) the GPU-hours overflow what
					// the figures hold exactly, and no run is that large
					return cli.Exit(fmt.Sprintf("--tokens %g: must be a positive number of tokens up to 1e18", c.Float64("tokens")), exitUsage)
				}
				tg, err := newTarget(chip, dt)
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				run, d, err := loadArg(c, env)
				if err != nil {
					return err
				}
				ft, err := readFineTune(c)
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				m, err := trainingModel(c, analyzer.NewModel(d))
				if err != nil {
					return err
				}
				knobs, err := readKnobs(c, dt)
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				if err := layout.RecipeOn(c.String("recipe"), chip); err != nil {
					return cli.Exit(err.Error()+" (--chip "+chip.Name+")", exitUsage)
				}
				tr, err := layout.TrainerFor(m, s, tg)
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				zero := c.IntSlice("zero")
				if st, ok := layout.Stacks[knobs.Stack]; ok && len(zero) == 0 {
					zero = []int{st.ZeRO} // the stack's sharding (DDP replicas for the Trainer and Unsloth)
				}
				if seq := c.Int64("seq"); seq > maxTrainSeq {
					return cli.Exit(fmt.Sprintf("--seq %d: want at most %d tokens per sequence", seq, maxTrainSeq), exitUsage)
				}
				if c.Bool("try-turbo") && !strings.EqualFold(chip.Vendor, "AMD") {
					return cli.Exit(fmt.Sprintf("--try-turbo: Primus-Turbo's MoE path runs on AMD Instinct under ROCm (--chip %s is %s's)", chip.Name, chip.Vendor), exitUsage)
				}
				if c.Int("top") < 0 {
					return cli.Exit(fmt.Sprintf("--top %d: want 0 (the default) or more layouts", c.Int("top")), exitUsage)
				}
				if knobs.OffloadParams && len(zero) > 0 && slices.Max(zero) < 3 {
					return cli.Exit(fmt.Sprintf("--offload params streams ZeRO-3's parameter shards from host memory (ZeRO-Infinity): it needs --zero 3 (--zero %s keeps every parameter whole on each GPU)", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(zero)), ", "), "[]")), exitUsage)
				}
				plan, err := tr.PlanTrain(layout.PlanOptions{GPUs: c.Int64("gpus"), GBS: c.Int64("gbs"), Seq: c.Int64("seq"),
					MemoryBytes: chip.MemoryBytes(), Domain: int64(chip.Efficiency.ScaleUpDomain), Top: c.Int("top"),
					ZeRO: zero, Knobs: knobs, AllowTight: c.Bool("allow-tight"), FineTune: ft.Kind(), Frameworks: planFrameworks(c),
					MoEOverlaps: c.StringSlice("try-a2a-overlap"), Dispatchers: c.StringSlice("try-dispatcher"), TurboMoE: c.Bool("try-turbo")})
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				for i := range plan.Top { // each row as the one analyze command that reproduces it
					plan.Top[i].Analyze = reproduce(c, c.Args().First(), run.ID > 0, s, ft, plan.Top[i].Step.Layout)
				}
				out := trainPlanOutput{Plan: plan}
				if tokens := c.Float64("tokens"); tokens > 0 && len(plan.Top) > 0 {
					best := plan.Top[0].Step
					busy := 1 - best.Bubble/best.StepTime
					price, source := prices.For(chip)
					run, err := econ.Training(tokens, best.TokensPerS, best.Layout.GPUs(), busy, price, source, db.PowerOf(chip))
					if err != nil {
						return cli.Exit("--tokens: "+err.Error(), exitFailure)
					}
					out.Cost = &run
				}
				emitted, err := emitTraining(c, d, m, plan, chip.Name, run.ID == 0)
				if err != nil {
					return err
				}
				if dir := c.String("output"); dir != "" {
					files := output.Files{}
					for _, n := range emitted.Names { // beside plan.md
						files[n] = []byte(emitted.Contents[n])
					}
					if plan.Feasible > 0 {
						if err := files.Add("plan.png", func(w io.Writer) error {
							return render.RenderPNG(render.PlanChart(fmt.Sprintf("%s on %d x %s: feasible layouts", d.Model.Name, c.Int64("gpus"), tg.Label()), plan), w)
						}); err != nil {
							return cli.Exit("plan chart: "+err.Error(), exitFailure)
						}
					}
					if err := files.Add("plan.json", func(w io.Writer) error { return writeJSON(w, out) }); err != nil {
						return err
					}
					if err := files.Add("plan.md", func(w io.Writer) error {
						if err := render.WritePlanPage(w, d.Model.Name, tg.Label(), plan, "plan.png"); err != nil {
							return err
						}
						return render.WriteTrainingCost(w, out.Cost)
					}); err != nil {
						return err
					}
					if err := output.WriteDir(dir, files); err != nil {
						return cli.Exit("plan: "+err.Error(), exitFailure)
					}
				}
				if c.Bool("json") {
					return writeJSON(c.App.Writer, out)
				}
				if err := render.WritePlan(c.App.Writer, d.Model.Name, tg.Label(), plan); err != nil {
					return err
				}
				if c.String("output") == "" && len(emitted.Names) > 0 {
					fmt.Fprintf(c.App.Writer, "\n## Run it (%s)\n", render.Visible(c.String("emit")))
					if err := emit.WriteAll(c.App.Writer, emitted); err != nil {
						return err
					}
				}
				if err := render.WriteTrainingCost(c.App.Writer, out.Cost); err != nil {
					return err
				}
				if plan.Feasible == 0 {
					return cli.Exit(fmt.Sprintf("plan train: %s", plan.NoFit), exitFailure)
				}
				return nil
			},
		}, planServeCommand(env)},
	}
}

// reproduce is the analyze command that times layout l as plan train did: the global flags
// that chose the model and chips, the model as the user named it, the plan's chip, precision
// and recipe, the tensor precisions analyze would not default to, the fine-tune, and the
// layout with its framework knobs. Run as printed it gives the same step time and verdict
// (TestPrintedCommandsReproduce).
func reproduce(c *cli.Context, sel string, fromDB bool, s analyzer.Scenario, ft analyzer.FineTune, l layout.Layout) string {
	args := append(globalArgs(c, fromDB), "analyze", sel, "--phase", "training")
	for _, name := range []string{"system", "chip", "dtype", "recipe"} {
		if c.IsSet(name) {
			args = append(args, "--"+name, c.String(name))
		}
	}
	// the plan's tensor precisions where analyze's defaults (weights and activations at
	// --dtype, gradients bf16) differ: an FP8 plan keeps 16-bit weights
	compute := analyzer.DType(s.ComputeDType)
	for _, w := range []struct {
		flag     string
		d, deflt analyzer.DType
	}{{"weight-dtype", s.WeightDType, compute}, {"act-dtype", s.ActDType, compute}, {"grad-dtype", s.GradDType, analyzer.BF16}} {
		if w.d != "" && w.d != w.deflt {
			args = append(args, "--"+w.flag, w.d.String())
		}
	}
	args = append(args, ft.Flags()...)
	args = append(args, l.AnalyzeFlags()...)
	return shell.Join(args...)
}

// emitTraining is the winning layout as --emit's framework writes it (nothing without --emit).
func emitTraining(c *cli.Context, d *model.Dump, m *analyzer.Model, plan layout.Plan, chip string, zoo bool) (emit.Files, error) {
	fw := strings.ToLower(strings.TrimSpace(c.String("emit")))
	if fw == "" && c.IsSet("emit-version") {
		return emit.Files{}, cli.Exit("--emit-version: give --emit FRAMEWORK too", exitUsage)
	}
	if fw == "" || len(plan.Top) == 0 {
		if fw != "megatron" && fw != "torchtitan" && fw != "" {
			return emit.Files{}, cli.Exit(fmt.Sprintf("--emit %q: want megatron or torchtitan", c.String("emit")), exitUsage)
		}
		return emit.Files{}, nil
	}
	id := launchID(d, zoo)
	best := plan.Top[0]
	t := emit.Training{Model: id, Name: d.Model.Name, Release: c.String("emit-version"), PlanID: emit.PlanID(invocation(c, c.Args().First(), !zoo)), Layout: best.Step.Layout, Layers: m.Fingerprint.Layers, FP8: strings.ToLower(c.String("recipe")), Chip: chip, MoE: m.Fingerprint.MoE != nil,
		Title: fmt.Sprintf("mrep plan train, the winner: %s, step %.3g s, %.0f tokens/s per GPU; %s", d.Model.Name, best.Step.StepTime,
			best.Step.TokensPerS/float64(best.Step.Layout.GPUs()), best.Analyze)}
	fs, err := emit.WriteTraining(fw, "train", t)
	if err != nil {
		return emit.Files{}, cli.Exit("--emit: "+err.Error(), exitUsage)
	}
	return fs, nil
}
