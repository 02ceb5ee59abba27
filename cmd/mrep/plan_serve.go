package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	gochart "github.com/wcharczuk/go-chart/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/emit"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/internal/output"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/runref"
	"github.com/mrep-dev/mrep/serve"
	"github.com/mrep-dev/mrep/timing"
)

func planServeCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "size a serving deployment: chips x TP/EP x batch caps x replicas that fit, meet the TTFT/TPOT SLOs and carry the load, with $/1M tokens and J/token",
		ArgsUsage: "MODEL  (a zoo name from `mrep models`, a dump or config.json file, or a stored run)",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "chip", Value: cli.NewStringSlice("H100-SXM"), Usage: "`CHIP`(s) to search, as `mrep chips` lists them; repeat for several"},
			&cli.StringFlag{Name: "engine", Usage: "serving engine whose fitted figures time the kernels where a chip has them (chips.json efficiency.lanes): trtllm, vllm, sglang, atom (AMD's ATOM, Instinct only) (default: vllm on AMD chips, whose figures come from AMD's vLLM tables; trtllm elsewhere)"},
			&cli.Int64Flag{Name: "isl", Value: 2000, Usage: "input (prompt) tokens per request"},
			&cli.Int64Flag{Name: "osl", Value: 500, Usage: "output tokens per request"},
			&cli.StringFlag{Name: "workload", Usage: "CSV `FILE` of isl,osl (one request per line) or isl,osl,count (a histogram): the mix's mean lengths replace --isl/--osl"},
			&cli.Float64Flag{Name: "prefix-hit", Usage: "share of each prompt served from the prefix cache, 0 to <1 (default 0)"},
			&cli.Int64Flag{Name: "kv-block", Value: 32, Usage: "paged KV cache tokens per block: each sequence reserves whole blocks (TensorRT-LLM 32, vLLM 16; 0: contiguous)"},
			&cli.BoolFlag{Name: "disagg", Usage: "also search disaggregated deployments: a prefill pool and a decode pool of any two layouts, balanced for the load, each request's KV cache sent between them"},
			&cli.IntFlag{Name: "spec-tokens", Usage: "speculative decoding / MTP: draft tokens proposed per step (default 0: none)"},
			&cli.Float64Flag{Name: "spec-accept", Value: 0.7, Usage: "with --spec-tokens: probability each draft token is accepted"},
			&cli.Float64Flag{Name: "spec-draft-cost", Usage: "with --spec-tokens: cost of drafting one token, as a share of a decode step (default 1/layers: an MTP head of one layer)"},
			&cli.StringFlag{Name: "ttft", Usage: "time-to-first-token SLO, e.g. 1s or 500ms"},
			&cli.StringFlag{Name: "tpot", Usage: "time-per-output-token SLO, e.g. 50ms"},
			&cli.StringFlag{Name: "slo-quantile", Value: serve.DefaultSLOQuantile, Usage: "the statistic of the simulated requests the SLOs hold at: mean, p50, p90 or p99 (a deployment must meet them in the steady state and simulated step by step under the load)"},
			&cli.Float64Flag{Name: "users", Usage: "concurrent users (closed loop)"},
			&cli.Float64Flag{Name: "rate", Usage: "arrival rate, requests/s"},
			&cli.Int64Flag{Name: "gpus", Usage: "deploy on exactly N GPUs (replicas = N / TP)"},
			&cli.Int64Flag{Name: "max-gpus", Usage: "search deployments of at most N GPUs"},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "compute precision (fp8: FP8 GEMMs and weights)"},
			&cli.StringFlag{Name: "weight-dtype", Usage: "weight precision (default: --dtype)"},
			&cli.StringFlag{Name: "kv-dtype", Usage: "KV-cache precision (default: --dtype)"},
			&cli.StringSliceFlag{Name: "price", Usage: "price per GPU-hour, CHIP=USD (overrides the chips database)"},
			&cli.Float64Flag{Name: "token-budget", Value: serve.DefaultEngine().TokenBudget, Usage: "tokens per engine step, prefill chunks and decode together"},
			&cli.Float64Flag{Name: "kv-fraction", Value: serve.DefaultEngine().KVFraction, Usage: "share of the free memory given to the KV cache"},
			&cli.IntFlag{Name: "top", Value: 10, Usage: "deployments to show"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write serve.md, serve.json and the Pareto chart (serve.png) to `DIR`"},
			&cli.StringFlag{Name: "chart", Usage: "what serve.png compares: chips (one curve per chip, its best layouts; the default with several --chip) or layouts (one curve per chip and layout; the default with one)"},
			&cli.StringFlag{Name: "emit", Usage: "write each recommended deployment for `ENGINE` (vllm, sglang, trtllm, atom): its launch command and config with the planned layout and limits, and the engine's benchmark command for the workload; into -o DIR, else printed after the plan (implies --engine ENGINE unless given)"},
			&cli.StringFlag{Name: "emit-version", Usage: "with --emit: the `RELEASE` of the engine to write for (default: the newest mrep checked; one it does not know is refused with the list)"},
			&cli.StringFlag{Name: "model-id", Usage: "the Hugging Face `ID` or path the emitted commands load (default: the config's _name_or_path, else the model's name)"},
		},
		Action: func(c *cli.Context) error {
			o, targets, inputs, err := servePlanOptions(c)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			run, d, err := loadArg(c, env)
			if err != nil {
				return err
			}
			if note, err := checkpointPrecision(c, d, &o.Scenario); err != nil {
				return cli.Exit(err.Error(), exitFailure)
			} else if note != "" {
				fmt.Fprintln(c.App.ErrWriter, note)
			}
			m := analyzer.NewModel(d)
			specDefaults(c, &o.Engine, hasMTPHeads(d), m.Fingerprint.Layers)
			plan, err := serve.PlanServe(m, targets, o)
			if err != nil {
				return cli.Exit("plan serve: "+err.Error(), exitFailure)
			}
			plan.Command = invocation(c, c.Args().First(), run.ID > 0)
			emitted, notes, err := emitDeployments(c, d, plan, run.ID == 0)
			if err != nil {
				return err
			}
			if dir := c.String("output"); dir != "" {
				files := output.Files{}
				for _, f := range emitted { // the launch files sit beside serve.md
					for _, n := range f.Names {
						files[n] = []byte(f.Contents[n])
					}
				}
				if len(plan.Pareto) > 0 {
					chart, err := serveChart(c, d.Model.Name, o, plan)
					if err != nil {
						return err
					}
					if err := files.Add("serve.png", func(w io.Writer) error { return render.RenderPNG(chart, w) }); err != nil {
						return cli.Exit("serve chart: "+err.Error(), exitFailure)
					}
				}
				if err := files.Add("serve.json", func(w io.Writer) error { return writeJSON(w, plan) }); err != nil {
					return err
				}
				if err := files.Add("serve.md", func(w io.Writer) error {
					if err := render.WriteServePlan(w, d.Model.Name, plan, inputs); err != nil {
						return err
					}
					if len(plan.Pareto) > 0 {
						_, err := fmt.Fprintf(w, "\n![tokens/s per GPU against tokens/s per user](serve.png)\n")
						return err
					}
					return nil
				}); err != nil {
					return err
				}
				if err := output.WriteDir(dir, files); err != nil {
					return cli.Exit("plan serve: "+err.Error(), exitFailure)
				}
			}
			if c.Bool("json") {
				err = writeJSON(c.App.Writer, plan)
			} else {
				err = render.WriteServePlan(c.App.Writer, d.Model.Name, plan, inputs)
			}
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintf(c.App.ErrWriter, "note: %s\n", render.Visible(n))
			}
			if !c.Bool("json") && c.String("output") == "" && len(emitted) > 0 {
				fmt.Fprintf(c.App.Writer, "\n## Run it (%s)\n", render.Visible(c.String("emit")))
				for _, f := range emitted {
					if err := emit.WriteAll(c.App.Writer, f); err != nil {
						return err
					}
				}
			}
			if plan.Meeting == 0 {
				return cli.Exit("plan serve: "+plan.NoConfig, exitFailure)
			}
			return nil
		},
	}
}

// servePlanOptions turns the flags into the planner's question and targets.
func servePlanOptions(c *cli.Context) (serve.PlanOptions, []serve.Target, []render.ServeInputs, error) {
	o := serve.PlanOptions{ISL: c.Int64("isl"), OSL: c.Int64("osl"), Users: c.Float64("users"), Rate: c.Float64("rate"),
		GPUs: c.Int64("gpus"), MaxGPUs: c.Int64("max-gpus"), Top: c.Int("top"), Engine: serve.DefaultEngine()}
	// 0 is the planner's "no load"; a flag given as 0 asked for a load and got none
	switch {
	case c.IsSet("users") && !(o.Users > 0):
		return o, nil, nil, fmt.Errorf("--users %g: must be positive", o.Users)
	case c.IsSet("rate") && !(o.Rate > 0):
		return o, nil, nil, fmt.Errorf("--rate %g: must be positive (requests/s)", o.Rate)
	}
	var err error
	if path := c.String("workload"); path != "" {
		if c.IsSet("isl") || c.IsSet("osl") {
			return o, nil, nil, fmt.Errorf("--workload %s: give a workload file or --isl/--osl, not both", render.Visible(path))
		}
		f, err := openRegular(path)
		if err != nil {
			return o, nil, nil, fmt.Errorf("--workload: %w", err)
		}
		w, err := serve.ParseWorkload(render.Visible(path), f)
		f.Close()
		if err != nil {
			return o, nil, nil, err
		}
		o.UseWorkload(render.Visible(path), w)
	}
	engine, err := serve.ParseEngine(engineFlag(c))
	if err != nil {
		return o, nil, nil, fmt.Errorf("--%w", err)
	}
	if name := engine; name != "" {
		// the engine's documented defaults, for the smallest memory among the chips asked
		mem := math.Inf(1)
		if db, err := chipDB(c); err == nil {
			for _, n := range c.StringSlice("chip") {
				if ch, err := db.Lookup(n); err == nil {
					mem = math.Min(mem, ch.MemoryBytes()/(1<<30))
				}
			}
		}
		e, err := serve.EnginePreset(name, mem)
		if err != nil {
			return o, nil, nil, fmt.Errorf("--%w", err)
		}
		o.Engine = e
	} else {
		// no engine named: TensorRT-LLM's defaults, its request path and MTP figures included
		o.Engine.MTP = serve.Figures("")
		o.Engine.RequestPathUs = o.Engine.MTP.RequestPathUs
	}
	o.Engine.SpecTokens, o.Engine.SpecAccept, o.Engine.SpecDraftCost = c.Int("spec-tokens"), c.Float64("spec-accept"), c.Float64("spec-draft-cost")
	o.Disagg = c.Bool("disagg")
	if c.IsSet("kv-block") || o.Engine.Name == "" {
		o.Engine.KVBlock = c.Int64("kv-block")
	}
	o.Engine.PrefixHit = c.Float64("prefix-hit")
	if o.TTFT, err = parseSLO("ttft", c.String("ttft")); err != nil {
		return o, nil, nil, err
	}
	if o.TPOT, err = parseSLO("tpot", c.String("tpot")); err != nil {
		return o, nil, nil, err
	}
	o.SLOQuantile = c.String("slo-quantile")
	if c.IsSet("token-budget") || o.Engine.Name == "" {
		o.Engine.TokenBudget = c.Float64("token-budget")
	}
	if c.IsSet("kv-fraction") || o.Engine.Name == "" {
		o.Engine.KVFraction, o.Engine.AutoKVFraction = c.Float64("kv-fraction"), false
	}
	// the planner states the ranges; its error names the option as the flag is spelled
	if err := o.Validate(); err != nil {
		var oe *serve.OptionError
		if errors.As(err, &oe) {
			return o, nil, nil, fmt.Errorf("--%w", oe)
		}
		return o, nil, nil, err
	}
	s := analyzer.DefaultScenario()
	if err := readPrecision(c, &s); err != nil {
		return o, nil, nil, err
	}
	o.Scenario = s

	db, err := chipDB(c)
	if err != nil {
		return o, nil, nil, err
	}
	prices, err := chips.ParsePrices(db, c.StringSlice("price"))
	if err != nil {
		return o, nil, nil, err
	}
	var targets []serve.Target
	var inputs []render.ServeInputs
	for _, name := range c.StringSlice("chip") {
		chip, err := db.Lookup(name)
		if err != nil {
			return o, nil, nil, fmt.Errorf("--chip: %w", err)
		}
		if err := serve.EngineRunsOn(engine, chip.Vendor); err != nil {
			return o, nil, nil, fmt.Errorf("--chip %s: %w", render.Visible(chip.Name), err)
		}
		// the planner times kernels with the achievable model, built here as for plan train,
		// with the engine's figures on this chip where they were fitted
		lane := serve.Lane(engine, chip)
		chip.Efficiency = chip.Efficiency.Lane(lane)
		pred, err := timing.New(chip, s.ComputeDType)
		if err != nil {
			return o, nil, nil, fmt.Errorf("plan serve: chip %s: %w", chip.Name, err)
		}
		t := serve.Target{Chip: chip, Pred: pred, Power: db.PowerOf(chip), MaxTP: 8}
		t.PriceUSDPerGPUHour, t.PriceSource = prices.For(chip)
		if d := int64(chip.Efficiency.ScaleUpDomain); d > 0 && d < t.MaxTP {
			t.MaxTP = d
		}
		price := "no price on file (give --price)"
		if t.PriceUSDPerGPUHour > 0 {
			price = fmt.Sprintf("$%.2f per GPU-hour from %s", t.PriceUSDPerGPUHour, t.PriceSource)
		}
		if l, ok := db.LanesOf(chip.Name)[lane]; ok {
			price += fmt.Sprintf("; kernels timed with the %s figures fitted on this chip", lane)
			if l.Release != "" {
				price += " (" + render.Visible(l.Release) + ")" // the release the figures hold for
			}
		}
		inputs = append(inputs, render.ServeInputs{Chip: chip.Name, Price: price,
			Power: fmt.Sprintf("%.0f W TDP, %.0f W idle, %.0f W node share per GPU (%s)", t.Power.TDPW, t.Power.IdleW, t.Power.NodeOverheadW, t.Power.Source)})
		targets = append(targets, t)
	}
	return o, targets, inputs, nil
}

// parseSLO reads a duration with its unit ("50ms", "1s", "1.5s"); empty is no SLO.
func parseSLO(flag, v string) (float64, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--%s %q: want a positive duration with its unit, e.g. 50ms or 1s", flag, v)
	}
	return d.Seconds(), nil
}

// specDefaults fills what --spec-tokens leaves unstated: for a model with MTP heads, the named
// engine's measured acceptance at that many drafts and its draft cost (serve.Figures); else
// --spec-accept's default and a draft of one layer's cost.
func specDefaults(c *cli.Context, e *serve.Engine, mtp bool, layers int64) {
	if e.SpecTokens <= 0 {
		return
	}
	if a := e.MTP.AcceptAt(e.SpecTokens); mtp && a > 0 && !c.IsSet("spec-accept") {
		e.SpecAccept = a
	}
	if c.IsSet("spec-draft-cost") {
		return
	}
	switch {
	case mtp && e.MTP.MTPDraftCost > 0:
		e.SpecDraftCost = e.MTP.MTPDraftCost
	case layers > 0:
		e.SpecDraftCost = 1 / float64(layers)
	}
}

// hasMTPHeads says whether the model carries multi-token-prediction heads (DeepSeek-V3's
// num_nextn_predict_layers): the drafter the engines run for --spec-tokens without a draft model.
func hasMTPHeads(d *model.Dump) bool {
	n := fmt.Sprint(d.TextConfig()["num_nextn_predict_layers"])
	return n != "<nil>" && n != "0"
}

// engineFlag is the engine plan serve plans for: --engine, else the one --emit writes for.
func engineFlag(c *cli.Context) string {
	if e := c.String("engine"); e != "" {
		return e
	}
	return c.String("emit")
}

// emitDeployments is each recommended deployment's launch files for --emit's engine (written
// beside serve.md with -o, printed after the plan without).
func emitDeployments(c *cli.Context, d *model.Dump, plan serve.Plan, zoo bool) ([]emit.Files, []string, error) {
	engine := strings.ToLower(strings.TrimSpace(c.String("emit")))
	if engine == "" {
		return nil, nil, nil
	}
	id := c.String("model-id")
	if id == "" {
		id = launchID(d, zoo)
	}
	deps, notes := emit.FromPlan(plan, emit.For{Model: id, Top: c.Int("top"), MTP: hasMTPHeads(d), Release: c.String("emit-version"),
		PlanID: emit.PlanID(plan.Command), Name: d.Model.Name})
	var out []emit.Files
	said := map[string]bool{} // a note that holds for every deployment is said once
	for i, dep := range deps {
		fs, err := emit.Write(engine, fmt.Sprintf("deploy-%d", i+1), dep)
		if errors.Is(err, emit.ErrNotExpressible) {
			notes = append(notes, fmt.Sprintf("deployment %d (TP%d EP%d) is not written: %v", i+1, dep.TP, dep.EP, err))
			continue
		}
		if err != nil {
			return nil, nil, cli.Exit("--emit: "+err.Error(), exitUsage)
		}
		for _, n := range fs.Notes {
			if !said[n] {
				said[n] = true
				notes = append(notes, n)
			}
		}
		out = append(out, fs)
	}
	return out, notes, nil
}

// serveChart is serve.png: the chips compared (several --chip) or each chip's layouts (one, or
// --chart layouts).
func serveChart(c *cli.Context, model string, o serve.PlanOptions, plan serve.Plan) (gochart.Chart, error) {
	kind := c.String("chart")
	if kind == "" {
		kind = "layouts"
		if len(c.StringSlice("chip")) > 1 {
			kind = "chips"
		}
	}
	switch kind {
	case "chips":
		return render.ServeChipsChart(servePlanTitle(model, o), plan), nil
	case "layouts":
		return render.ServePlanChart(servePlanTitle(model, o), plan), nil
	}
	return gochart.Chart{}, cli.Exit(fmt.Sprintf("plan serve --chart %q: want chips or layouts", render.Visible(kind)), exitUsage)
}

// servePlanTitle is serve.png's title: the model, workload, precision and load it answers.
func servePlanTitle(model string, o serve.PlanOptions) string {
	load := "offline"
	switch {
	case o.Users > 0:
		load = fmt.Sprintf("%g users", o.Users)
	case o.Rate > 0:
		load = fmt.Sprintf("%g req/s", o.Rate)
	}
	return fmt.Sprintf("%s: %d in / %d out, %s weights, %s KV, %s; Pareto front of one replica over batch caps (B)",
		model, o.ISL, o.OSL, o.Scenario.WeightDType.Label(), o.Scenario.KVDType.Label(), load)
}

// launchID is what an emitted command loads: the config's _name_or_path, else a zoo model's
// Hugging Face id (only for the zoo's own dumps: a stored run named like a zoo model is not
// that model), else the model's name.
func launchID(d *model.Dump, zoo bool) string {
	if id := runref.ID(d.Config); id != "" {
		return id
	}
	if zoo {
		if id := examples.HFID(d.Model.Name); id != "" {
			return id
		}
	}
	return d.Model.Name
}

// checkpointPrecision plans a model in its published checkpoint's precision when no dtype flag
// says otherwise: the config's quantization_config (DeepSeek-V3 and Kimi-K2 ship FP8 blocks,
// gpt-oss MXFP4 experts) is what an engine loads. The note says so, and how to plan the 16-bit
// model instead.
func checkpointPrecision(c *cli.Context, d *model.Dump, s *analyzer.Scenario) (string, error) {
	q, _ := d.Config["quantization_config"].(map[string]any)
	method, _ := q["quant_method"].(string)
	if c.IsSet("dtype") || c.IsSet("weight-dtype") {
		// the user's precision wins, but a quantized checkpoint loads as stored: weights of
		// another width are another checkpoint, which the note names
		stored := map[string]float64{"fp8": 1, "mxfp4": 0.5}[strings.ToLower(method)]
		if stored == 0 || s.WeightBytes == stored {
			return "", nil
		}
		return fmt.Sprintf("note: %s's published checkpoint is %s (its config's quantization_config); this plans %s weights, "+
			"which the engines load only from a checkpoint converted to them, not from the published one",
			render.Visible(d.Model.Name), method, s.WeightDType.Label()), nil
	}
	p := analyzer.Precision{Compute: c.String("dtype"), Act: c.String("act-dtype"), KV: c.String("kv-dtype")}
	switch strings.ToLower(method) {
	case "fp8":
		p.Compute = "fp8" // block-scaled FP8 GEMMs, as the engines run these checkpoints
	case "mxfp4":
		p.Weight = "fp4" // 4-bit expert weights, read as stored
	default:
		return "", nil
	}
	if err := s.SetPrecision(p); err != nil {
		return "", fmt.Errorf("the checkpoint's %s precision: %w", method, err)
	}
	return fmt.Sprintf("note: %s's checkpoint is %s (its config's quantization_config): planned in it; --dtype bf16 plans the 16-bit model",
		render.Visible(d.Model.Name), method), nil
}
