package compare

import (
	"fmt"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
)

// MetricNames lists what `mrep history --metric` accepts.
const MetricNames = "params, trainable_params, active_params, kv_bytes_per_token, step_time (measured by the training hook, beside the prediction), mfu_measured, T_est:<phase>[:<profile>], tokens_per_s:<phase>[:<profile>], AI_hbm:<phase>[:<profile>], MFU:<phase>[:<profile>], drift[:<pattern>], std:<pattern>, mean:<pattern>"

// ParseMetric validates a metric name; it returns the kind and its argument parts.
func ParseMetric(name string) (kind string, args []string, err error) {
	parts := strings.Split(name, ":")
	kind, args = parts[0], parts[1:]
	switch kind {
	case "params", "trainable_params", "active_params", "kv_bytes_per_token", "step_time", "mfu_measured":
		if len(args) == 0 {
			return kind, args, nil
		}
	case "T_est", "tokens_per_s", "AI_hbm", "MFU":
		if len(args) >= 1 && len(args) <= 2 {
			ph := analyzer.Phase(args[0])
			if ph == analyzer.Training || ph == analyzer.Prefill || ph == analyzer.Decode {
				return kind, args, nil
			}
		}
	case "drift":
		if len(args) <= 1 {
			return kind, args, nil
		}
	case "std", "mean":
		if len(args) == 1 {
			return kind, args, nil
		}
	}
	return "", nil, fmt.Errorf("metric %q: want one of %s", name, MetricNames)
}

// PhaseValue reads a phase metric (T_est in ms, MFU in %) from run metrics.
func PhaseValue(r RunMetrics, kind, target string, ph analyzer.Phase, profile string) (float64, bool) {
	p, ok := r.Find(target, ph, profile)
	if !ok {
		return 0, false
	}
	switch kind {
	case "T_est":
		return p.TEst * 1e3, true
	case "tokens_per_s":
		return p.TokensPerS, true
	case "AI_hbm":
		return p.AIHBM, true
	case "MFU":
		return 100 * p.MFU, true // a percentage, as people read MFU
	}
	return 0, false
}

// MetricLabel is a history metric with its unit.
func MetricLabel(metric string) string {
	kind, _, _ := strings.Cut(metric, ":")
	switch kind {
	case "step_time", "T_est":
		return metric + " (ms)"
	case "mfu_measured", "MFU":
		return metric + " (%)"
	case "tokens_per_s":
		return metric + " (per GPU)"
	}
	return metric
}
