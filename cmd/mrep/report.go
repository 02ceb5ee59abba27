package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/internal/output"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/render/chart"
	"github.com/mrep-dev/mrep/report"
)

func int64List(c *cli.Context, name string) ([]int64, error) {
	raw := c.String(name)
	if raw == "" {
		return nil, nil
	}
	var out []int64
	for _, f := range strings.Split(raw, ",") {
		var v int64
		if _, err := fmt.Sscan(strings.TrimSpace(f), &v); err != nil || v < 1 {
			return nil, cli.Exit(fmt.Sprintf("--%s %q: want comma-separated positive integers", name, raw), exitFailure)
		}
		out = append(out, v)
	}
	return out, nil
}

func reportCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "write the full model report: markdown, charts, the sensitivity grid as CSV and every value as JSON",
		ArgsUsage: "[MODEL]  (a zoo name from `mrep models`, a dump or config.json file, or a stored run; default: the latest run)",
		Flags: append(scenarioFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "mrep-report", Usage: "output `DIR`"},
			&cli.BoolFlag{Name: "svg", Usage: "also write every chart as SVG"},
			&cli.StringFlag{Name: "sensitivity", Value: "medium_full_grid", Usage: "grid profile: small_grid, medium_full_grid, large_full_grid or off"},
			&cli.StringFlag{Name: "label-mode", Value: "minimal", Usage: "roofline labels: minimal (legend) or all (annotate every point)"},
			&cli.BoolFlag{Name: "no-diagrams", Usage: "leave out the Mermaid architecture diagrams"},
			&cli.BoolFlag{Name: "no-appendix", Usage: "leave out the derivation appendix and checklist"},
			&cli.Float64Flag{Name: "x-min", Usage: "roofline x-axis minimum (AI_hbm)"},
			&cli.Float64Flag{Name: "x-max", Usage: "roofline x-axis maximum"},
			&cli.Float64Flag{Name: "y-min", Usage: "roofline y-axis minimum (TFLOP/s)"},
			&cli.Float64Flag{Name: "y-max", Usage: "roofline y-axis maximum"},
			&cli.StringFlag{Name: "batches", Usage: "decode batch sweep, e.g. 1,2,4,8"},
			&cli.StringFlag{Name: "seqs", Usage: "prefill sequence sweep, e.g. 128,1024,8192"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output: the run and the files written"},
		),
		Action: func(c *cli.Context) error {
			o, err := readScenario(c)
			if err != nil {
				return err
			}
			if !c.IsSet("exec") {
				// the report sets the prediction beside the seed's naive profile (flash vs
				// naive attention bytes); its sweeps compare the first and last profile
				o.profiles = []analyzer.ExecProfile{analyzer.Naive, analyzer.Achievable}
			}
			ro := report.DefaultOptions()
			if b, err := int64List(c, "batches"); err != nil {
				return err
			} else if b != nil {
				ro.Batches = b
			}
			if s, err := int64List(c, "seqs"); err != nil {
				return err
			} else if s != nil {
				ro.Seqs, ro.SeqsDefault = s, false
			}
			ro.SensitivityProfile = c.String("sensitivity")
			mode := c.String("label-mode")
			if mode != "minimal" && mode != "all" {
				return cli.Exit(fmt.Sprintf("--label-mode %q: want minimal or all", mode), exitFailure)
			}
			dir := c.String("output")
			run, d, err := loadArg(c, env)
			if err != nil {
				return err
			}
			data, err := report.Build(d, runInfo(run), o.scenario, o.targets, o.profiles, ro)
			if err != nil {
				return cli.Exit("report: "+err.Error(), exitFailure)
			}
			laid, err := layoutResults(data.Model, o)
			if err != nil {
				return err
			}
			files, err := writeReport(dir, data, reportFiles{
				chart: render.ChartOptions{XMin: c.Float64("x-min"), XMax: c.Float64("x-max"), YMin: c.Float64("y-min"), YMax: c.Float64("y-max"), LabelMode: mode},
				md:    render.ReportOptions{Generated: env.Now(), Diagrams: !c.Bool("no-diagrams"), Appendix: !c.Bool("no-appendix"), Layouts: laid},
				svg:   c.Bool("svg"),
			})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				paths := make([]string, len(files))
				for i, f := range files {
					paths[i] = filepath.Join(dir, f)
				}
				return writeJSON(c.App.Writer, struct {
					Run    int64    `json:"run"`
					Report string   `json:"report"`
					Files  []string `json:"files"`
				}{data.Run.ID, filepath.Join(dir, "report.md"), paths})
			}
			fmt.Fprintf(c.App.Writer, "wrote %s (%d files: %s)\n", filepath.Join(dir, "report.md"), len(files), strings.Join(files, ", "))
			return nil
		},
	}
}

type reportFiles struct {
	chart render.ChartOptions
	md    render.ReportOptions
	svg   bool
}

// writeReport renders charts into memory first, then writes every file atomically; a chart that
// fails to render fails the report before anything is replaced.
func writeReport(dir string, data report.Data, f reportFiles) ([]string, error) {
	out := output.Files{}
	f.md.Charts = map[string]bool{}
	f.md.ChartExt = "png"
	f.md.CSVName = "sensitivity.csv"
	f.md.Chart = f.chart
	for _, nc := range render.ReportCharts(data, f.chart) {
		var png bytes.Buffer
		if err := render.RenderPNG(nc.Chart, &png); err != nil {
			return nil, cli.Exit(fmt.Sprintf("report: chart %s: %v", nc.Name, err), exitFailure)
		}
		out[nc.Name+".png"] = png.Bytes()
		if f.svg {
			var svg bytes.Buffer
			if err := render.RenderSVG(nc.Chart, &svg); err != nil {
				return nil, cli.Exit(fmt.Sprintf("report: chart %s: %v", nc.Name, err), exitFailure)
			}
			out[nc.Name+".svg"] = svg.Bytes()
		}
		f.md.Charts[nc.Name] = true
	}
	if hs := render.WeightHistograms(data, 12); len(hs) > 0 {
		var png bytes.Buffer
		if err := chart.HistogramGrid(&png, hs, 3); err != nil {
			return nil, cli.Exit(fmt.Sprintf("report: weight distributions: %v", err), exitFailure)
		}
		out["weight_distributions.png"] = png.Bytes()
		f.md.HasWeights = true
	}
	if len(data.Sensitivity) > 0 {
		var csv bytes.Buffer
		if err := render.WriteSensitivityCSV(&csv, data.Sensitivity); err != nil {
			return nil, err
		}
		out["sensitivity.csv"] = csv.Bytes()
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", " ")
	if err := enc.Encode(data); err != nil {
		return nil, fmt.Errorf("report json: %w", err)
	}
	out["report.json"] = js.Bytes()
	var md bytes.Buffer
	if err := render.WriteReport(&md, data, f.md); err != nil {
		return nil, err
	}
	out["report.md"] = md.Bytes()
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	if err := output.WriteDir(dir, out); err != nil {
		return nil, cli.Exit("report: "+err.Error(), exitFailure)
	}
	return names, nil
}
