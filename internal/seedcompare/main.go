// Command seedcompare puts mrep's results for the seed example's settings (DeepSeek-V3 on
// H200 FP8, 1-byte weights, activations and KV, B=8, S=L=255, TP=EP=1) next to the example's own
// tables, read from the seed file, and says why they differ where they differ by more than 10%.
//
//	go run ./internal/seedcompare -seed internal/seedcompare/testdata/seed001_tables.md \
//	    -dump examples/dumps/DeepSeek-V3.json.gz -o examples/reports/COMPARISON.md
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/ingest"
)

func main() {
	seed := flag.String("seed", "internal/seedcompare/testdata/seed001_tables.md", "the seed example report's tables")
	dump := flag.String("dump", "examples/dumps/DeepSeek-V3.json.gz", "DeepSeek-V3 dump")
	out := flag.String("o", "examples/reports/COMPARISON.md", "output markdown")
	flag.Parse()
	if err := run(*seed, *dump, *out); err != nil {
		fmt.Fprintf(os.Stderr, "seedcompare: %v\n", err)
		os.Exit(1)
	}
}

func run(seedPath, dumpPath, outPath string) error {
	f, err := os.Open(seedPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tables, err := parseTables(f)
	if err != nil {
		return fmt.Errorf("%s: %w", seedPath, err)
	}
	d, err := ingest.ReadFile(dumpPath, ingest.Options{})
	if err != nil {
		return err
	}
	c, err := Compare(tables, analyzer.NewModel(d))
	if err != nil {
		return err
	}
	tmp := outPath + ".tmp"
	w, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := c.Write(w); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, outPath)
}

// Table is a markdown table: header cells and rows of cells.
type Table struct {
	Header []string
	Rows   [][]string
}

func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var out []string
	for _, c := range strings.Split(line, "|") {
		out = append(out, strings.Trim(strings.TrimSpace(c), "`"))
	}
	return out
}

// parseTables reads every markdown table of the seed, keyed by its header line.
func parseTables(r io.Reader) (map[string]Table, error) {
	out := map[string]Table{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur *Table
	var key string
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			if cur != nil {
				out[key] = *cur
				cur = nil
			}
			continue
		}
		if cur == nil {
			cur = &Table{Header: cells(line)}
			key = strings.Join(cur.Header, "|")
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "|---") || strings.HasPrefix(strings.TrimSpace(line), "|:--") {
			continue
		}
		cur.Rows = append(cur.Rows, cells(line))
	}
	if cur != nil {
		out[key] = *cur
	}
	return out, sc.Err()
}

func find(tables map[string]Table, prefix string) (Table, error) {
	for k, t := range tables {
		if strings.HasPrefix(k, prefix) {
			return t, nil
		}
	}
	return Table{}, fmt.Errorf("no table starting %q in the seed", prefix)
}

// seedBytes reads the seed's "1.30 TB" style sizes. The seed's units are binary: its
// parameter memory of 639,940.65 MB for 671,026,404,352 one-byte parameters is 2^20-byte MB.
func seedBytes(s string) float64 {
	f := strings.Fields(s)
	if len(f) != 2 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	mult := map[string]float64{"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "TF": 1e12}
	return v * mult[f[1]]
}

func num(s string) float64 {
	if v := seedBytes(s); !math.IsNaN(v) {
		return v
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Comparison holds both sides.
type Comparison struct {
	KPI, Sweep, Bytes   Table
	Results             map[string]analyzer.Result // phase/profile
	SeedTraining        map[string]analyzer.Result // mrep with the seed's training model
	SweepResults        map[int64]map[string]analyzer.Result
	Target              analyzer.Target
	Scenario            analyzer.Scenario
	SeedParamBinaryMB   float64
	OptimizerTraining   float64
	TemporaryNaivePre   float64
	TemporaryNaiveScore float64
}

// Compare runs mrep with the seed's settings.
func Compare(tables map[string]Table, m *analyzer.Model) (*Comparison, error) {
	c := &Comparison{Results: map[string]analyzer.Result{}, SeedTraining: map[string]analyzer.Result{}, SweepResults: map[int64]map[string]analyzer.Result{}}
	var err error
	if c.KPI, err = find(tables, "Mode|Exec|F_realizable|bytes_hbm"); err != nil {
		return nil, err
	}
	if c.Sweep, err = find(tables, "Batch|AI_hbm naive|AI_hbm eff"); err != nil {
		return nil, err
	}
	if c.Bytes, err = find(tables, "Mode|bytes_weights naive"); err != nil {
		return nil, err
	}
	h200, err := chips.Default().Lookup("H200")
	if err != nil {
		return nil, err
	}
	if c.Target, err = analyzer.NewTarget(h200, "fp8", nil); err != nil {
		return nil, err
	}
	s := analyzer.DefaultScenario()
	s.Batch, s.Seq, s.KVLen = 8, 255, 255
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	c.Scenario = s
	seed := s
	seed.SeedTraining = true
	for _, ph := range analyzer.Phases {
		for _, p := range []analyzer.ExecProfile{analyzer.Naive, analyzer.Efficient} {
			st, err := m.Analyze(ph, s, p)
			if err != nil {
				return nil, err
			}
			c.Results[string(ph)+"/"+p.Name] = analyzer.Evaluate(st, c.Target)
			st, err = m.Analyze(ph, seed, p)
			if err != nil {
				return nil, err
			}
			c.SeedTraining[string(ph)+"/"+p.Name] = analyzer.Evaluate(st, c.Target)
		}
	}
	var batches []int64
	for _, r := range c.Sweep.Rows {
		b, _ := strconv.ParseInt(r[0], 10, 64)
		batches = append(batches, b)
	}
	pts, err := analyzer.SweepDecodeBatch(m, s, c.Target, []analyzer.ExecProfile{analyzer.Naive, analyzer.Efficient}, batches)
	if err != nil {
		return nil, err
	}
	for _, p := range pts {
		c.SweepResults[p.X] = p.Results
	}
	c.SeedParamBinaryMB = float64(m.TotalParams) / (1 << 20)
	tr := c.Results["training/naive"].Step
	for _, t := range tr.Terms {
		if t.Name == "optimizer" {
			c.OptimizerTraining = t.Cost.BytesHBM()
		}
	}
	c.TemporaryNaivePre = c.Results["prefill/naive"].Step.Cost.BytesTemporary
	return c, nil
}

func rel(mrep, seed float64) float64 {
	if seed == 0 {
		if mrep == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (mrep - seed) / math.Abs(seed)
}

func delta(mrep, seed float64) string {
	d := rel(mrep, seed)
	mark := ""
	if math.Abs(d) > 0.10 {
		mark = " **›10%**"
	}
	if math.IsInf(d, 0) {
		return "new" + mark
	}
	return fmt.Sprintf("%+.1f%%%s", 100*d, mark)
}

func gib(b float64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%.2f TiB", b/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.2f KiB", b/(1<<10))
}

// Write renders the comparison.
func (c *Comparison) Write(out io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	s := c.Scenario
	p("# mrep beside the seed example report\n\n")
	p("The seed's example (the founding documents' example report; its tables are carried in `internal/seedcompare/testdata/seed001_tables.md`) analyzes DeepSeek-V3 on `H200_SXM_FP8` with 1-byte parameters, activations and KV, `B=%d`, `S=L=%d`, `TP=EP=1`, naive and efficient. Below, its tables (read from the seed file by `go run ./internal/seedcompare`) sit beside mrep's for the same settings; every mrep number is computed, and every difference above 10%% is explained.\n\n", s.Batch, s.Seq)
	p("**Units.** The seed labels sizes GB and TB but means GiB and TiB: its parameter memory of 639,940.65 MB is 671,026,404,352 one-byte parameters divided by 2^20 (= %.2f). Seed sizes are converted with binary multipliers; both columns below are in binary units. mrep's own reports use SI for traffic (GB = 1e9 B) and IEC for capacity.\n\n", c.SeedParamBinaryMB)
	p("**Peak.** The seed uses 1979.0 TFLOP/s; mrep's chip database has NVIDIA's dense FP8 figure 1978.9 (`OI_knee` %.3f vs the seed's 412.292).\n\n", c.Target.Knee)

	p("## Regime KPI matrix\n\n| Mode | Exec | F_realizable seed | mrep | Δ | bytes_hbm seed | mrep | Δ | AI_hbm seed | mrep | Δ | T_est ms seed | mrep | Δ | Regime seed | mrep | below floor |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, r := range c.KPI.Rows {
		key := r[0] + "/" + r[1]
		m := c.Results[key]
		cost, tm := m.Step.Cost, m.Timing
		below := "no"
		if tm.BelowFloor {
			below = fmt.Sprintf("⚠ yes (≥ %.3f ms)", tm.TEst*1e3)
		}
		p("| `%s` | `%s` | %s | %.2f TF | %s | %s | %s | %s | %s | %.3e | %s | %s | %.3f | %s | `%s` | `%s` | %s |\n", r[0], r[1],
			r[2], tm.FRealizable/1e12, delta(tm.FRealizable, num(r[2])),
			r[3], gib(cost.BytesHBM()), delta(cost.BytesHBM(), num(r[3])),
			r[4], tm.AIHBM, delta(tm.AIHBM, num(r[4])),
			r[6], tm.TKnob*1e3, delta(tm.TKnob*1e3, num(r[6])), strings.Trim(r[8], "`"), tm.Regime, below)
	}
	p("\nWith the seed's own training model (`--seed-training`: prefill × 3 FLOPs, × 2 bytes), mrep's training rows become:\n\n| Exec | bytes_hbm seed | mrep --seed-training | Δ | AI_hbm seed | mrep | Δ | T_est ms seed | mrep | Δ |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range c.KPI.Rows {
		if r[0] != "training" {
			continue
		}
		m := c.SeedTraining["training/"+r[1]]
		p("| `%s` | %s | %s | %s | %s | %.3e | %s | %s | %.3f | %s |\n", r[1], r[3], gib(m.Step.Cost.BytesHBM()), delta(m.Step.Cost.BytesHBM(), num(r[3])),
			r[4], m.Timing.AIHBM, delta(m.Timing.AIHBM, num(r[4])), r[6], m.Timing.TKnob*1e3, delta(m.Timing.TKnob*1e3, num(r[6])))
	}
	tn := c.Results["training/naive"].Step.Cost
	p("\n**Why they differ.**\n\n")
	p("1. *Training is a different model, on purpose.* The seed multiplies prefill; mrep adds the backward pass (weights read again, weight gradients written), and the Adam optimizer step, which alone moves %s per step at one microbatch (%.0f B per parameter: fp32 master, m and v read and written, gradients read, weights written). Training bytes are therefore %.1f× the seed's and the regime is HBM-bound, not compute-bound. With `--seed-training` the rows land within the seed's ballpark (table above); the remaining gap is the prefill gap below, doubled.\n",
		gib(c.OptimizerTraining), 2*s.OptimizerStateBytes+s.GradBytes+s.WeightBytes, tn.BytesHBM()/num(c.KPI.Rows[0][3]))
	p("2. *Efficient rows are below the compulsory traffic in both tools.* `WRF=4/4/2` streams a quarter (dense, attention) or half (experts) of weights that do not fit on chip (50 MiB of L2 against %s of touched weights in decode). The seed presents these as achievable (e.g. efficient prefill `compute-bound`); mrep computes the same kind of number, marks it ⚠ and gives the floor: efficient prefill cannot beat %.3f ms and efficient decode %.3f ms on this chip, which is naive's time, not half of it.\n",
		gib(c.Results["decode/naive"].Step.Cost.FloorWeights), c.Results["prefill/efficient"].Timing.TEst*1e3, c.Results["decode/efficient"].Timing.TEst*1e3)
	pn := c.Results["prefill/naive"].Step.Cost
	var seedPre float64
	for _, r := range c.KPI.Rows {
		if r[0] == "prefill" && r[1] == "naive" {
			seedPre = num(r[3])
		}
	}
	p("3. *Naive temporaries.* mrep counts score and probability matrices crossing HBM four times (write scores, read for softmax, write probabilities, read for PV) plus every elementwise pass (norms, SwiGLU, residuals); the seed counts fewer. That is %s of naive prefill temporaries in mrep; with activations counted per GEMM (see the byte decomposition) it is why mrep's naive prefill moves %s the seed's bytes while the weight bytes agree to %s.\n",
		gib(c.TemporaryNaivePre), delta(pn.BytesHBM(), seedPre), delta(pn.BytesWeights, num(c.Bytes.Rows[1][1])))
	p("4. *F_realizable.* This comparison uses mrep's ideal roofline (the seed's own kind of model: datasheet peak, nominal bandwidth), so mrep's `F_realizable` here is the FLOPs the kernels execute (causal attention at its lower triangle, the prefill LM head on the last token); the seed inflates its FLOPs by `1/eta_tc = B_sat/M_eff`. mrep's prediction (`mrep analyze`, the report) replaces both with the achievable time model. Where a phase is HBM-bound (all naive rows, all decode rows), `F_realizable` does not change `T_est`.\n")

	p("\n## Decode batch sweep\n\n| Batch | AI_hbm naive seed | mrep | Δ | AI_hbm eff seed | mrep | Δ | T_est naive ms seed | mrep | Δ | T_est eff ms seed | mrep | Δ | mrep eff floor ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range c.Sweep.Rows {
		bt, _ := strconv.ParseInt(r[0], 10, 64)
		res := c.SweepResults[bt]
		n, e := res["naive"], res["efficient"]
		p("| %d | %s | %.3e | %s | %s | %.3e | %s | %s | %.3f | %s | %s | %.3f | %s | %.3f |\n", bt,
			r[1], n.Timing.AIHBM, delta(n.Timing.AIHBM, num(r[1])), r[2], e.Timing.AIHBM, delta(e.Timing.AIHBM, num(r[2])),
			r[3], n.Timing.TKnob*1e3, delta(n.Timing.TKnob*1e3, num(r[3])), r[4], e.Timing.TKnob*1e3, delta(e.Timing.TKnob*1e3, num(r[4])), e.Timing.TEst*1e3)
	}
	var worst float64
	var worstAt int64
	var worstWhat string
	for _, r := range c.Sweep.Rows {
		bt, _ := strconv.ParseInt(r[0], 10, 64)
		res := c.SweepResults[bt]
		for i, v := range []float64{res["naive"].Timing.AIHBM, res["efficient"].Timing.AIHBM, res["naive"].Timing.TKnob * 1e3, res["efficient"].Timing.TKnob * 1e3} {
			if d := math.Abs(rel(v, num(r[1+i]))); d > worst {
				worst, worstAt, worstWhat = d, bt, []string{"naive AI_hbm", "efficient AI_hbm", "naive T_est", "efficient T_est"}[i]
			}
		}
	}
	verdict := "no cell differs by more than 10%"
	if worst > 0.10 {
		verdict = "some cells differ by more than 10%"
	}
	eff := c.SweepResults[128]["efficient"].Timing
	p("\n**Why they differ.** Both tools read the expected number of distinct experts (`E(1-(1-k/E)^T)`) and the same KV, so %s: the largest gap is %.1f%% (%s at B=%d), from mrep's per-GEMM activations and elementwise temporaries. What the seed does not say is that its efficient column is unreachable: at every batch it sits below the compulsory HBM traffic (mrep's floor is the last column; at B=128 efficient cannot beat %.3f ms, against the %.3f ms both tools model). The seed's ≈2× efficient speed-up in decode is an artefact of `WRF`, not a gain a kernel can deliver for weights that do not fit on chip.\n",
		verdict, 100*worst, worstWhat, worstAt, eff.TEst*1e3, eff.TKnob*1e3)

	p("\n## Mode byte decomposition\n\n| Mode | Exec | term | seed | mrep | Δ |\n|---|---|---|---:|---:|---:|\n")
	names := []string{"bytes_weights", "bytes_activations", "bytes_kv", "bytes_temporary", "bytes_hbm"}
	for _, r := range c.Bytes.Rows {
		for pi, prof := range []string{"naive", "efficient"} {
			cost := c.Results[r[0]+"/"+prof].Step.Cost
			vals := []float64{cost.BytesWeights, cost.BytesActivations, cost.BytesKV, cost.BytesTemporary, cost.BytesHBM()}
			for i, n := range names {
				sv := num(r[1+pi*5+i])
				p("| `%s` | `%s` | `%s` | %s | %s | %s |\n", r[0], prof, n, r[1+pi*5+i], gib(vals[i]), delta(vals[i], sv))
			}
		}
	}
	dk := c.Results["decode/naive"].Step.Cost
	p("\n**Why they differ.**\n\n- *Training weights* include gradient writes and optimizer state in mrep (see the KPI section); *training KV* is zero in mrep because training keeps K and V as activations, not in a cache.\n- *Activations* are every GEMM's input and output (mrep) rather than the seed's block-level inputs and outputs; the MLA LoRA intermediates (`q_a`, `kv_a`) and routed tokens' expert inputs and outputs are counted individually, so mrep's naive activations are larger.\n- *KV* agrees to the byte in decode: %s = 8 sequences × 256 tokens (255 read + 1 written) × 576 latent elements × 61 layers × 1 byte.\n- *Temporaries*: four passes over scores and probabilities plus elementwise traffic in mrep (see above); with flash attention mrep still counts norms, SwiGLU and residual traffic scaled by `elementwise=0.7`, which the seed drops almost entirely.\n",
		gib(dk.BytesKV))
	_, err := io.WriteString(out, b.String())
	return err
}
