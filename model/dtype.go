package model

import "strings"

var dtypeBytes = map[string]float64{
	"float64": 8, "double": 8, "complex128": 16, "complex64": 8,
	"float32": 4, "float": 4, "int32": 4, "uint32": 4, "complex32": 4,
	"float16": 2, "half": 2, "bfloat16": 2, "int16": 2, "uint16": 2,
	"int64": 8, "uint64": 8, "long": 8,
	"int8": 1, "uint8": 1, "bool": 1,
	"float4_e2m1fn_x2": 1, // two fp4 values packed per byte element
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
