package render

import (
	"fmt"
	"io"

	"github.com/mrep-dev/mrep/runref"
)

// WriteZoo lists the zoo's models: what a name on the command line stands for.
func WriteZoo(out io.Writer, zoo []runref.ZooModel) error {
	w := &errWriter{w: out}
	var rows [][]string
	for _, z := range zoo {
		moe := "dense"
		if z.Experts > 0 {
			moe = fmt.Sprintf("%d experts, top-%d", z.Experts, z.TopK)
		}
		rows = append(rows, []string{code(z.Name), Visible(z.ModelType), paramCount(float64(z.Params)), paramCount(z.ActiveParams),
			fmt.Sprint(z.Layers), fmt.Sprint(z.Hidden), Visible(z.Attention), moe})
	}
	table(w, []string{"Model", "model_type", "Params", "Active per token", "Layers", "Hidden", "Attention", "MoE"}, "llrrrrll", rows)
	w.printf("\nEvery command that takes a RUN takes these names (or a prefix that names one), a dump file, a config.json of the same architecture, or a stored run: `mrep plan serve %s --users 50`.\n", firstName(zoo))
	return w.err
}

func firstName(zoo []runref.ZooModel) string {
	for _, z := range zoo {
		if z.Name == "Llama-3.1-8B" {
			return z.Name
		}
	}
	if len(zoo) > 0 {
		return zoo[0].Name
	}
	return "MODEL"
}

// paramCount writes a parameter count as model cards do: 70.6B, 124M.
func paramCount(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
