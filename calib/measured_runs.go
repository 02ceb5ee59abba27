package calib

import (
	"errors"
	"fmt"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/model"
)

// ErrNoMeasurement: a run carries no measurement the time model can be set against.
var ErrNoMeasurement = errors.New("no usable measurement")

// precisions maps the hook's precision names to the time model's dtypes.
var precisions = map[string]string{"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8",
	"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

// FromMeasurement is the training-step row a checkpoint's measurement describes: the run's
// model (selected by sel, e.g. "id:7") on chip, data parallel over the world size (one GPU
// per process, TP = PP = 1), a global batch of tokens_per_step / seq_len sequences, and the
// median step time as the measured value. So a team calibrates mrep to its own cluster from
// its own training runs (mrep calibrate --from).
func FromMeasurement(sel string, d *model.Dump, chip string) (Row, error) {
	m := d.Measurement
	if m == nil {
		return Row{}, fmt.Errorf("run %s: dumped without a measurement (the training hook writes one): %w", sel, ErrNoMeasurement)
	}
	if m.TokensPerStep == nil || m.SeqLen == nil || *m.SeqLen <= 0 {
		return Row{}, fmt.Errorf("run %s: the measurement lacks tokens per step or the sequence length (pass tokens= and seq_len= to maybe_dump): %w", sel, ErrNoMeasurement)
	}
	dtype, ok := precisions[m.Precision]
	if !ok {
		return Row{}, fmt.Errorf("run %s: precision %q is not one the time model knows (fp32, tf32, bf16, fp16, fp8): %w", sel, m.Precision, ErrNoMeasurement)
	}
	tokens, seq, world := *m.TokensPerStep, *m.SeqLen, m.WorldSize
	if tokens%seq != 0 || (tokens/seq)%world != 0 {
		return Row{}, fmt.Errorf("run %s: %d tokens per step is not a whole number of %d-token sequences per rank over %d ranks: %w", sel, tokens, seq, world, ErrNoMeasurement)
	}
	gbs := tokens / seq
	step := int64(-1)
	if d.Run.Step != nil {
		step = *d.Run.Step
	}
	return Row{
		ID: fmt.Sprintf("%s@step%d", sel, step), Kind: KindTrainStep,
		Source: fmt.Sprintf("measured by the mrep_export training hook on %s (median of %d steps)", m.Device, m.StepsTimed),
		Model:  sel, Chip: chip, DType: dtype, GPUs: world, TP: 1, PP: 1, Seq: seq, GBS: gbs, MBS: gbs / world,
		Measured: m.StepTimeS, Unit: kindUnits[KindTrainStep],
	}, nil
}

// Comparison sets a checkpoint's measured step time beside mrep's prediction for the same
// scenario (chip from the device name or the caller, world size, batch, sequence, precision).
type Comparison struct {
	Measured model.Measurement `json:"measured"`
	Chip     string            `json:"chip,omitempty"`
	ChipFrom string            `json:"chip_from,omitempty"` // "device name" or "--chip"
	// Predicted and Roofline are mrep's achievable prediction and its ideal bound, in seconds
	// per optimizer step; 0 with Note set when there is no prediction.
	Predicted float64 `json:"predicted_s,omitempty"`
	Roofline  float64 `json:"roofline_s,omitempty"`
	// MFU: 6 x active parameters x tokens / (step time x GPUs x the chip's dense peak at the
	// precision), measured and predicted.
	MFUMeasured   float64 `json:"mfu_measured,omitempty"`
	MFUPredicted  float64 `json:"mfu_predicted,omitempty"`
	TokensPerGPUs float64 `json:"tokens_per_s_per_gpu,omitempty"` // measured
	Note          string  `json:"note,omitempty"`
}

// Compare predicts the run's measured training step. chip names the chip ("" picks it from the
// device name); the note says what is missing when no prediction can be made.
func Compare(sel string, d *model.Dump, db *chips.DB, chip string) Comparison {
	m := d.Measurement
	c := Comparison{Measured: *m}
	if m.TokensPerStep != nil {
		c.TokensPerGPUs = float64(*m.TokensPerStep) / m.StepTimeS / float64(m.WorldSize)
	}
	if chip != "" {
		c.Chip, c.ChipFrom = chip, "--chip"
	} else if ch, ok := db.ForDevice(m.Device); ok {
		c.Chip, c.ChipFrom = ch.Name, "device name"
	} else {
		c.Note = fmt.Sprintf("no chip in the database matches the device %q: name one with --chip (or add yours with --chips-file)", m.Device)
		return c
	}
	row, err := FromMeasurement(sel, d, c.Chip)
	if err != nil {
		c.Note = err.Error()
		return c
	}
	ps, err := Prepare([]Row{row}, db, func(string) (*model.Dump, error) { return d, nil })
	if err != nil {
		c.Note = err.Error()
		return c
	}
	p := ps[0]
	if p.Skip != nil {
		c.Note = p.Skip.Error()
		return c
	}
	c.Chip = p.Chip.Name
	if c.Predicted, c.Roofline, err = p.Predict(p.Chip.Efficiency); err != nil {
		c.Note = err.Error()
		return c
	}
	if peak, err := p.Chip.Peak(row.DType); err == nil && m.TokensPerStep != nil {
		work := 6 * analyzer.NewModel(d).Active * float64(*m.TokensPerStep) / float64(m.WorldSize) / peak
		c.MFUMeasured, c.MFUPredicted = work/m.StepTimeS, work/c.Predicted
	}
	if !p.Fits {
		c.Note = "the model does not fit one GPU at this layout by mrep's count (" + p.FitNote + ")"
	}
	if why := impossible(row, c.Roofline); why != "" {
		// the hook's clock, tokens or world size is off (or the chip is another): say so
		// beside the figures rather than print an MFU above 100%
		c.Note = "this measurement is impossible on " + c.Chip + ": " + why
	}
	return c
}
