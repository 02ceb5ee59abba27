package model

import "strings"

var dtypeBytes = map[string]float64{
	"float64": 8, "double": 8, "complex128": 16, "complex64": 8,
	"float32": 4, "float": 4, "int32": 4, "uint32": 4, "complex32": 4,
	"float16": 2, "half": 2, "bfloat16": 2, "int16": 2, "uint16": 2,
	"int64": 8, "uint64": 8, "long": 8,
	"int8": 1, "uint8": 1, "bool": 1,
	"float4_e2m1fn_x2": 1, // two fp4 values packed per byte element
	// quantized and bit-packed dtypes torch names (packed types count their byte elements)
	"qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1,
	"bits8": 1, "bits16": 2, "bits1x8": 1, "bits2x4": 1, "bits4x2": 1,
	"uint1": 0.125, "uint2": 0.25, "uint3": 0.375, "uint4": 0.5, "uint5": 0.625, "uint6": 0.75, "uint7": 0.875,
	"int1": 0.125, "int2": 0.25, "int3": 0.375, "int4": 0.5, "int5": 0.625, "int6": 0.75, "int7": 0.875,
}

// DTypeBytes is the element size of a torch dtype name ("float8_e4m3fn" and every other
// float8_* variant is 1 byte). ok is false for a dtype mrep does not know.
func DTypeBytes(dtype string) (float64, bool) {
	if b, ok := dtypeBytes[dtype]; ok {
		return b, true
	}
	if strings.HasPrefix(dtype, "float8_") {
		return 1, true
	}
	return 0, false
}
