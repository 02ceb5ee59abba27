package analyzer

import (
	"fmt"
	"strings"
)

// DType is a precision as the command line and the calibration rows name it. It is the one
// place a name becomes bytes per element; a scenario keeps the names it was given beside the
// bytes, so anything printed back (a reproduce command, a chart title) names the precision the
// user asked for: fp16 and bf16 are both 2 bytes, and bytes cannot tell them apart.
type DType string

// The precisions mrep knows.
const (
	FP32 DType = "fp32"
	TF32 DType = "tf32"
	BF16 DType = "bf16"
	FP16 DType = "fp16"
	FP8  DType = "fp8"
	INT8 DType = "int8"
	FP4  DType = "fp4"
)

// dtypes is every DType in the order messages list them, with its bytes per element.
var dtypes = []struct {
	d     DType
	bytes float64
}{{FP32, 4}, {TF32, 4}, {BF16, 2}, {FP16, 2}, {FP8, 1}, {INT8, 1}, {FP4, 0.5}}

// DTypeNames is the list a message offers: "fp32, tf32, bf16, fp16, fp8, int8, fp4".
func DTypeNames() string {
	var n []string
	for _, x := range dtypes {
		n = append(n, string(x.d))
	}
	return strings.Join(n, ", ")
}

// ParseDType reads a precision name, case-insensitive.
func ParseDType(name string) (DType, error) {
	d := DType(strings.ToLower(strings.TrimSpace(name)))
	if d.Bytes() == 0 {
		return "", fmt.Errorf("%q: want one of %s", name, DTypeNames())
	}
	return d, nil
}

// Bytes is the element size (0 for a name mrep does not know).
func (d DType) Bytes() float64 {
	for _, x := range dtypes {
		if x.d == d {
			return x.bytes
		}
	}
	return 0
}

// String is the name as flags take it ("fp16").
func (d DType) String() string { return string(d) }

// Label is the name as tables and titles print it ("FP16").
func (d DType) Label() string { return strings.ToUpper(string(d)) }

// Precision is a scenario's precisions as a user names them. An empty field takes its default:
// weights and activations the compute precision, the KV cache the activations', weight
// gradients bf16 (the flags' and the calibration rows' documented defaults).
type Precision struct {
	Compute, Weight, Act, KV, Grad string
}

// PrecisionError names the precision field that was given a name mrep does not know.
type PrecisionError struct {
	Field string // dtype, weight-dtype, act-dtype, kv-dtype, grad-dtype
	Name  string
}

func (e *PrecisionError) Error() string {
	return fmt.Sprintf("%s %q: want one of %s", e.Field, e.Name, DTypeNames())
}

// SetPrecision sets s's compute precision and each tensor's precision, names and bytes, from p
// with its defaults.
func (s *Scenario) SetPrecision(p Precision) error {
	compute, err := ParseDType(p.Compute)
	if err != nil {
		return &PrecisionError{"dtype", p.Compute}
	}
	pick := func(field, v string, fallback DType) (DType, error) {
		if v == "" {
			return fallback, nil
		}
		d, err := ParseDType(v)
		if err != nil {
			return "", &PrecisionError{field, v}
		}
		return d, nil
	}
	var w, a, kv, g DType
	if w, err = pick("weight-dtype", p.Weight, compute); err != nil {
		return err
	}
	if a, err = pick("act-dtype", p.Act, compute); err != nil {
		return err
	}
	if kv, err = pick("kv-dtype", p.KV, a); err != nil {
		return err
	}
	if g, err = pick("grad-dtype", p.Grad, BF16); err != nil {
		return err
	}
	s.ComputeDType = compute.String()
	s.SetDTypes(w, a, kv, g)
	return nil
}

// SetDTypes sets the tensors' precisions, names and bytes together.
func (s *Scenario) SetDTypes(weight, act, kv, grad DType) {
	s.WeightDType, s.ActDType, s.KVDType, s.GradDType = weight, act, kv, grad
	s.WeightBytes, s.ActBytes, s.KVBytes, s.GradBytes = weight.Bytes(), act.Bytes(), kv.Bytes(), grad.Bytes()
}

// TrainingPrecision is the scenario a training plan counts for a compute precision: 16-bit
// weights and activations (fp16 for fp16 training, bf16 otherwise: an FP8 or FP4 recipe keeps
// its 16-bit copies and quantizes per GEMM), bf16 weight gradients.
func TrainingPrecision(compute string) Precision {
	p := Precision{Compute: compute, Weight: string(BF16), Act: string(BF16)}
	if d, err := ParseDType(compute); err == nil && d == FP16 {
		p.Weight, p.Act = string(FP16), string(FP16)
	}
	return p
}
