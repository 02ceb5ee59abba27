// Package model holds the typed module dump (schemas/dump.schema.json) shared by ingest, store,
// analyzer and render, and the small facts about it that every package needs.
package model

import "encoding/json"

// Dump is one decoded, validated module dump.
type Dump struct {
	SchemaVersion int            `json:"schema_version"`
	Model         ModelInfo      `json:"model"`
	Config        map[string]any `json:"config"` // numbers are json.Number
	Framework     Framework      `json:"framework"`
	Run           RunInfo        `json:"run"`
	Modules       []Module       `json:"modules"`
	Trace         *Trace         `json:"trace,omitempty"`
	Measurement   *Measurement   `json:"measurement,omitempty"`
}

// ModelInfo is the model's identity.
type ModelInfo struct {
	Name          string `json:"name"`
	RootClass     string `json:"root_class"`
	Source        Source `json:"source"`
	TextConfigKey string `json:"text_config_key,omitempty"`
	DType         string `json:"dtype,omitempty"`
}

// Source says where the model came from.
type Source struct {
	Kind      string `json:"kind"` // module, hf_config, checkpoint
	Path      string `json:"path,omitempty"`
	ModelType string `json:"model_type,omitempty"`
}

// Framework holds the versions that produced the dump.
type Framework struct {
	Python       string  `json:"python"`
	Torch        string  `json:"torch"`
	Transformers *string `json:"transformers"`
	MrepExport   string  `json:"mrep_export"`
}

// RunInfo is the run metadata.
type RunInfo struct {
	Label       *string  `json:"label"`
	Step        *int64   `json:"step"`
	Tags        []string `json:"tags,omitempty"`
	CreatedAt   string   `json:"created_at"`
	ContentHash string   `json:"content_hash"`
}

// Module is one nn.Module of the tree. The root's Name is "" and its Parent nil.
type Module struct {
	Name     string   `json:"name"`
	Class    string   `json:"class"`
	PyModule string   `json:"py_module"`
	Parent   *string  `json:"parent"`
	Params   []Param  `json:"params"`
	Buffers  []Buffer `json:"buffers"`
}

// Tensor is what parameters and buffers share.
type Tensor struct {
	Name   string  `json:"name"`
	Shape  []int64 `json:"shape"` // nil for a lazy parameter
	DType  string  `json:"dtype"`
	Numel  int64   `json:"numel"`
	Device string  `json:"device"`
	TiedTo string  `json:"tied_to,omitempty"` // first occurrence of the same tensor; counted there only
}

// Param is a parameter.
type Param struct {
	Tensor
	RequiresGrad bool   `json:"requires_grad"`
	Lazy         bool   `json:"lazy,omitempty"`
	ExpertAxis   *int   `json:"expert_axis,omitempty"`
	Stats        *Stats `json:"stats,omitempty"`
}

// Buffer is a registered buffer.
type Buffer struct {
	Tensor
	Persistent bool `json:"persistent"`
}

// Stats are weight statistics over the finite values.
type Stats struct {
	Mean      float64  `json:"mean"`
	Std       *float64 `json:"std"`
	Min       float64  `json:"min"`
	Max       float64  `json:"max"`
	Nonfinite int64    `json:"nonfinite"`
	Hist      Hist     `json:"hist"`
	// Norm and Sketch (schema version 2): the Frobenius norm of the finite values and a
	// CountSketch of the tensor, from which drift between any two checkpoints is estimated.
	Norm   *float64  `json:"norm,omitempty"`
	Sketch []float64 `json:"sketch,omitempty"`
}

// Hist is a fixed-bin histogram over [Lo, Hi].
type Hist struct {
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	Counts []int64 `json:"counts"`
}

// Trace is FlopCounterMode's count of one real forward.
type Trace struct {
	Batch                 int64         `json:"batch"`
	Seq                   int64         `json:"seq"`
	Device                string        `json:"device"`
	AttnImplementation    *string       `json:"attn_implementation,omitempty"`
	ExpertsImplementation *string       `json:"experts_implementation,omitempty"`
	TotalFlops            int64         `json:"total_flops"`
	Modules               []TraceModule `json:"modules"`
}

// TraceModule is one module's traced FLOPs, inclusive of its children.
type TraceModule struct {
	Name  string           `json:"name"`
	Flops int64            `json:"flops"`
	Ops   map[string]int64 `json:"ops"`
}

// QualifiedName joins a module name and a tensor name as torch's named_parameters() does.
func QualifiedName(module, tensor string) string {
	if module == "" {
		return tensor
	}
	return module + "." + tensor
}

// ConfigNumber returns config[key] as float64 when it is a number.
func ConfigNumber(cfg map[string]any, key string) (float64, bool) {
	switch v := cfg[key].(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	}
	return 0, false
}

// TextConfig returns the config the text model reads: the nested text_config of a multimodal
// wrapper when the dump names one, else the config itself.
func (d *Dump) TextConfig() map[string]any {
	if d.Model.TextConfigKey != "" {
		if sub, ok := d.Config[d.Model.TextConfigKey].(map[string]any); ok {
			return sub
		}
	}
	return d.Config
}

// Measurement is what the exporter's training hook measured over the steps before a
// checkpoint (schema version 2): the median wall time of one optimizer step and what the step
// was, so mrep can set its prediction beside it.
type Measurement struct {
	StepTimeS     float64 `json:"step_time_s"`
	StepsTimed    int64   `json:"steps_timed"`
	TokensPerStep *int64  `json:"tokens_per_step,omitempty"` // all ranks together
	SeqLen        *int64  `json:"seq_len,omitempty"`
	WorldSize     int64   `json:"world_size"`
	Device        string  `json:"device"`
	Precision     string  `json:"precision"`
}

// TensorStat is one parameter's weight statistics, as history and diff read them.
type TensorStat struct {
	Name  string  `json:"name"`            // qualified
	Class string  `json:"class,omitempty"` // the owning module's class (LayerNorm, Linear, ...)
	Numel int64   `json:"numel"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	// Norm and Sketch are absent for dumps written before schema version 2.
	Norm   *float64  `json:"norm,omitempty"`
	Sketch []float64 `json:"sketch,omitempty"`
}
