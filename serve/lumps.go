package serve

import (
	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// Prompts arrive in lumps. The steady state asks each step for p prompt tokens on average, but
// an engine prefills whole prompts (or budget-sized chunks of one), so most steps of a
// decode-heavy mix carry no prefill and a few carry a whole chunk. A step's time is convex in
// its tokens (flat while the weights' streaming dominates, then rising with compute), so the
// mean of the lumpy steps exceeds the step of the mean tokens (Jensen). With the attention
// data-parallel (EP > TP), a prompt is prefilled by one attention group while the others wait
// for it at the experts' all-to-all: the step runs at that group's pace for the attention and
// dense layers, while the routed experts, shared by all groups, see the average tokens
// (skewedLumps) — unless the groups prefill in phase (lumpyStep).

// lumpyStep is the expected step of d decode tokens (of one attention group, dp groups sharing
// the experts) when prefill tokens average p per group and step but arrive as chunks of up to
// chunk tokens of prompts of isl.
func lumpyStep(m *analyzer.Model, s analyzer.Scenario, pr kernels.Predictor, e Engine, dp, d, ctx, p, chunk float64, isl int64) (kernels.Time, error) {
	step := func(prefill float64) (kernels.Time, error) { return cycle(m, s, pr, e, d, ctx, prefill, isl) }
	if p <= 0 || chunk <= 0 || d <= 0 {
		return step(p)
	}
	if pp := e.stages(); pp > 1 {
		// a pipeline's micro-batches take the chunks: a cycle's stages run each micro-batch in
		// turn, so a share chunks/PP of the micro-batch steps carries one
		chunks := p / chunk
		if chunks >= pp {
			return step(p)
		}
		with, err := step(chunk * pp)
		if err != nil {
			return kernels.Time{}, err
		}
		without, err := step(0)
		if err != nil {
			return kernels.Time{}, err
		}
		return with.Scale(chunks / pp).Add(without.Scale(1 - chunks/pp)), nil
	}
	if dp > 1 && !e.PrefillOnlySteps {
		return skewedLumps(m, s, pr, e, dp, d, ctx, p, chunk, isl)
	}
	// One group, or groups in phase: an engine that runs prefill-only steps (SGLang, ATOM)
	// prefills a group's waiting prompts in steps of their own, and a closed loop's users of
	// like lengths finish and return together, dealt round-robin, so the groups prefill in the
	// same steps (as the step-by-step simulation, which runs one group for all, has them; issue
	// 38 found SGLang's attention-DP runs with 8k prompts as it says, and the skewed model 2x
	// slow). SGLang's and ATOM's PrefillDelayer, off by default, enforces the same.
	lumps := p / chunk // chunks prefilled per step in each group
	if lumps >= 1 {
		return step(p)
	}
	// a share lumps of the steps carries a chunk, the rest decode only (and replay a CUDA
	// graph, where a step with prompt tokens launches its kernels one by one)
	with, err := step(chunk)
	if err != nil {
		return kernels.Time{}, err
	}
	without, err := step(0)
	if err != nil {
		return kernels.Time{}, err
	}
	return with.Scale(lumps).Add(without.Scale(1 - lumps)), nil
}

// skewedLumps is lumpyStep for attention groups out of phase (an engine mixing prefill chunks
// into decode steps: TensorRT-LLM's and vLLM's schedulers, each group on its own queue; the
// trtllm-bench DeepSeek-R1 attention-DP runs of calib/extended.json follow it): a chunk is
// prefilled by one group while the others decode and wait for it at the experts' all-to-all.
func skewedLumps(m *analyzer.Model, s analyzer.Scenario, pr kernels.Predictor, e Engine, dp, d, ctx, p, chunk float64, isl int64) (kernels.Time, error) {
	step := func(prefill float64) (kernels.Time, error) { return cycle(m, s, pr, e, d, ctx, prefill, isl) }
	lumps := dp * p / chunk // chunks prefilled per step across the replica
	if lumps >= dp {
		// every group prefills at least one chunk each step: the mean is what each sees
		return step(p)
	}
	// the slowest group carries one chunk (lumps < dp chunks spread one per group), the others
	// none; the experts see the replica's mean
	var with kernels.Time
	var err error
	if e.SpecTokens > 0 {
		with, err = step(chunk) // verifying drafts beside a chunk: no skew modelled
	} else {
		with, err = skewedStep(m, s, pr, d, ctx, chunk, p, isl)
	}
	if err != nil {
		return kernels.Time{}, err
	}
	if lumps >= 1 {
		return with, nil
	}
	without, err := step(0)
	if err != nil {
		return kernels.Time{}, err
	}
	return with.Scale(lumps).Add(without.Scale(1 - lumps)), nil
}

// skewedStep times a step in which this group prefills slow tokens while the routed experts
// see avg prefill tokens per group (equal when one group is the replica).
func skewedStep(m *analyzer.Model, s analyzer.Scenario, pr kernels.Predictor, d, ctx, slow, avg float64, isl int64) (kernels.Time, error) {
	ks, err := mixedKernels(m, s, d, ctx, slow, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	if s.EP <= s.TP || avg >= slow {
		return pr.Predict(ks), nil
	}
	mean, err := mixedKernels(m, s, d, ctx, avg, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	var out []kernels.Kernel
	for _, k := range ks {
		if k.Category != string(analyzer.CatRoutedExperts) {
			out = append(out, k)
		}
	}
	for _, k := range mean {
		if k.Category == string(analyzer.CatRoutedExperts) {
			out = append(out, k)
		}
	}
	return pr.Predict(out), nil
}
