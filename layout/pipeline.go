package layout

import "fmt"

// Pipeline accounting as Megatron-Core splits a model into PP x VP chunks:
//
//   - even (the default): each chunk holds layers / (PP·VP) decoder layers (the fullest holds the
//     ceiling when they do not divide), the embedding rides on the first chunk and the LM head and
//     loss on the last;
//   - --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split: the
//     embedding and the loss count as one layer each, so (layers + 2) / (PP·VP) per chunk, and
//     the first and last stages hold one decoder layer fewer (Llama-3.1-405B's 126 layers as
//     PP16 x VP8: 128 units, one per chunk);
//   - --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers (uneven first and
//     last stages): the rest split evenly over the middle stages.
//
// Megatron-LM megatron/core/transformer/transformer_block.py (get_num_layers_to_build) and
// megatron/training/arguments.py define these; mrep follows their arithmetic.

// StageCounts are the decoder layers the first, a middle and the last pipeline stage hold (all
// VP chunks of the stage together).
func (l Layout) StageCounts(layers int64) (first, mid, last int64) {
	chunks := max(l.PP*l.VP, 1)
	switch {
	case l.FirstStageLayers > 0 || l.LastStageLayers > 0:
		f, la := l.FirstStageLayers, l.LastStageLayers
		inner := l.PP - boolInt(f > 0) - boolInt(la > 0)
		rest := layers - f - la
		per := int64(0)
		if inner > 0 {
			per = (rest + inner - 1) / inner
		}
		if f == 0 {
			f = per
		}
		if la == 0 {
			la = per
		}
		if l.PP == 1 {
			return layers, layers, layers
		}
		return f, per, la
	case l.EmbeddingInPipe || l.LossInPipe:
		units := layers + boolInt(l.EmbeddingInPipe) + boolInt(l.LossInPipe)
		perStage := (units + chunks - 1) / chunks * l.VP
		first, mid, last = perStage, perStage, perStage
		if l.EmbeddingInPipe {
			first--
		}
		if l.LossInPipe {
			last--
		}
		if l.PP == 1 {
			first = perStage - boolInt(l.EmbeddingInPipe) - boolInt(l.LossInPipe)
			return first, first, first
		}
		return first, mid, last
	}
	per := (layers + chunks - 1) / chunks * l.VP
	return per, per, per
}

// StageLayers is how many decoder layers the fullest pipeline stage holds: stages need not
// divide the layers evenly (Llama 3 405B ran 126 layers on 16 stages).
func (l Layout) StageLayers(layers int64) int64 {
	f, m, la := l.StageCounts(layers)
	return max(f, m, la)
}

// validatePipeline checks the split Megatron would accept.
func (l Layout) validatePipeline(layers int64) error {
	units := layers + boolInt(l.EmbeddingInPipe) + boolInt(l.LossInPipe)
	switch {
	case l.FirstStageLayers < 0 || l.LastStageLayers < 0:
		return fmt.Errorf("first and last stage layers must be >= 0 (got %d, %d)", l.FirstStageLayers, l.LastStageLayers)
	case (l.FirstStageLayers > 0 || l.LastStageLayers > 0) && (l.EmbeddingInPipe || l.LossInPipe):
		return fmt.Errorf("uneven first/last stages and accounting the embedding or loss as layers are Megatron alternatives: give one")
	case (l.FirstStageLayers > 0 || l.LastStageLayers > 0) && l.PP < 2:
		return fmt.Errorf("first/last stage layers need pp >= 2")
	case l.FirstStageLayers+l.LastStageLayers > layers:
		return fmt.Errorf("first %d + last %d stage layers exceed the %d layers", l.FirstStageLayers, l.LastStageLayers, layers)
	case l.PP*l.VP > units:
		what := ""
		if units > layers {
			what = fmt.Sprintf(" (+%d for the embedding and loss counted as layers)", units-layers)
		}
		return fmt.Errorf("pp %d x vp %d stages exceed the %d layers%s", l.PP, l.VP, layers, what)
	}
	if f, m, la := l.StageCounts(layers); f < 0 || m < 0 || la < 0 {
		return fmt.Errorf("pp %d x vp %d leaves a stage without layers", l.PP, l.VP)
	}
	return nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// MegatronSplit is l with a pipeline split Megatron-LM accepts for layers decoder layers, or
// false when it has none. Megatron-LM's validate_args (megatron/training/arguments.py @d98e8a6)
// wants the layers, plus the embedding and loss where they are counted as layers, divisible by
// PP, and each stage's share divisible by VP; uneven first and last stages
// (--decoder-first/last-pipeline-num-layers) leave the rest divisible over the middle stages.
// A split mrep would otherwise time as ceil(L / (PP x VP)) per chunk is made explicit: first
// by counting the embedding and loss as layers (Megatron-Bridge's Llama-3.1-405B recipes), then,
// without virtual stages, by a smaller first stage; else the layout is not one Megatron runs.
func (l Layout) MegatronSplit(layers int64) (Layout, bool) {
	if l.PP <= 1 || layers <= 0 {
		return l, l.VP <= 1
	}
	vp := max(l.VP, 1)
	if l.FirstStageLayers > 0 || l.LastStageLayers > 0 {
		inner := l.PP - boolInt(l.FirstStageLayers > 0) - boolInt(l.LastStageLayers > 0)
		rest := layers - l.FirstStageLayers - l.LastStageLayers
		ok := rest >= 0 && (inner == 0 && rest == 0 || inner > 0 && rest%inner == 0 && rest/inner%vp == 0) &&
			l.FirstStageLayers%vp == 0 && l.LastStageLayers%vp == 0
		return l, ok
	}
	even := func(units int64) bool { return units%l.PP == 0 && units/l.PP%vp == 0 }
	if even(layers + boolInt(l.EmbeddingInPipe) + boolInt(l.LossInPipe)) {
		return l, true
	}
	if !l.EmbeddingInPipe && !l.LossInPipe && even(layers+2) {
		l.EmbeddingInPipe, l.LossInPipe = true, true
		return l, true
	}
	if vp == 1 && !l.EmbeddingInPipe && !l.LossInPipe {
		per := (layers + l.PP - 1) / l.PP
		if first := layers - (l.PP-1)*per; first >= 1 {
			l.FirstStageLayers = first
			return l, true
		}
	}
	return l, false
}

// eachStageRange calls fn with each run [a, b) of decoder layers the first, last or a middle
// pipeline stage holds, all of its VP chunks: Megatron fills the PP·VP chunks in order, virtual
// chunk v of stage s being the (v·PP + s)-th, each as large as StageCounts' arithmetic makes it;
// DualPipe's end ranks hold both the first and the last stage, its middle ranks the two middle
// ones. It gives a stage's composition (which of its layers are dense, which route to experts),
// not its size, which StageCounts has; it calls nothing with one stage. The planner asks it for
// every layout, so it allocates nothing.
func (l Layout) eachStageRange(layers int64, pos stagePos, fn func(a, b int64)) {
	if l.PP <= 1 || layers <= 0 {
		return
	}
	pp, vp := l.PP, max(l.VP, 1)
	chunks := pp * vp
	f, mid, la := l.StageCounts(layers)
	units := layers + boolInt(l.EmbeddingInPipe) + boolInt(l.LossInPipe)
	size := func(k int64) int64 {
		switch {
		case l.FirstStageLayers > 0 || l.LastStageLayers > 0:
			s, v := k%pp, k/pp
			n := mid
			switch s {
			case 0:
				n = f
			case pp - 1:
				n = la
			}
			return n/vp + boolInt(v < n%vp)
		case l.EmbeddingInPipe || l.LossInPipe:
			n := (units + chunks - 1) / chunks
			if k == 0 {
				n -= boolInt(l.EmbeddingInPipe)
			}
			if k == chunks-1 {
				n -= boolInt(l.LossInPipe)
			}
			return n
		}
		return (layers + chunks - 1) / chunks
	}
	next := int64(0)
	for k := int64(0); k < chunks && next < layers; k++ {
		s := k % pp
		var take bool
		switch {
		case pos == posMid && l.A2AOverlap == OverlapDualPipe:
			take = s == pp/2-1 || s == pp/2 // the middle pair
		case pos == posMid:
			take = s == pp/2
		case l.A2AOverlap == OverlapDualPipe:
			take = s == 0 || s == pp-1
		case pos == posFirst:
			take = s == 0
		default:
			take = s == pp-1
		}
		end := min(next+max(size(k), 0), layers)
		if take && end > next {
			fn(next, end)
		}
		next = end
	}
}
