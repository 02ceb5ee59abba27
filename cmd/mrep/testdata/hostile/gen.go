//go:build ignore

// gen writes the hostile input files TestHostileInputs feeds to mrep, one class of input per
// file-name prefix: rows_ (validate, calibrate), workload_ (plan serve --workload), chips_
// (--chips-file) and dump_ (ingest). Every file is derived here from a few valid templates,
// so a reader sees what each one breaks; TestHostileFilesAreGenerated checks that the
// committed files are this script's output.
//
//	go run ./testdata/hostile/gen.go testdata/hostile
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mrep-dev/mrep/ingest"
)

const rowsHeader = "id,kind,model,chip,dtype,kv_dtype,tp,batch,isl,osl,measured,unit\n"

// A TTFT row that is possible (Llama-2-7B, 2k tokens, FP8 on one H100: ~36 ms measured).
const goodRow = "a,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,0.036,s\n"

const chipTemplate = `{"chips":[{"name":%s,"peak_tflops":{"bf16":%s,"fp8":1979},"memory_gib":%s,"hbm_gbps":%s,"scale_up_gbps":450,"tdp_w":%s,"sources":["hostile test"]}]}` + "\n"

func chip(name, peak, mem, hbm, tdp string) string {
	return fmt.Sprintf(chipTemplate, name, peak, mem, hbm, tdp)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run gen.go DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	files := map[string]string{
		// rows: each breaks one rule of a rows file
		"rows_impossible.csv":     rowsHeader + goodRow + "fast,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,0.000036,s\n",
		"rows_negative.csv":       rowsHeader + "neg,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,-0.036,s\n",
		"rows_nan.csv":            rowsHeader + "nan,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,NaN,s\n",
		"rows_inf.csv":            rowsHeader + "inf,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,1e400,s\n",
		"rows_huge_tp.csv":        rowsHeader + "tp,ttft,Llama-2-7b,H100,fp8,fp8,1000000000,1,2048,1,0.036,s\n",
		"rows_unknown_column.csv": "id,kind,model,chip,dtype,tensor_parallel,measured,unit\n" + "x,ttft,Llama-2-7b,H100,fp8,2,0.036,s\n",
		"rows_duplicate_id.csv":   rowsHeader + goodRow + goodRow,
		"rows_wrong_unit.csv":     rowsHeader + "u,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,36,tok/s\n",
		"rows_unknown_chip.csv":   rowsHeader + "c,ttft,Llama-2-7b,H900,fp8,fp8,1,1,2048,1,0.036,s\n",
		"rows_unknown_field.json": `{"rows":[{"id":"j","kind":"ttft","model":"Llama-2-7b","chip":"H100","dtype":"fp8","isl":2048,"measured":0.036,"unit":"s","tensor_parallel":2}]}` + "\n",
		"rows_fraction_tp.json":   `[{"id":"f","kind":"ttft","model":"Llama-2-7b","chip":"H100","dtype":"fp8","isl":2048,"tp":1.5,"measured":0.036,"unit":"s"}]` + "\n",
		// a unit or digit typo, a layout larger than its GPUs, a key or column given twice
		"rows_measured_huge.csv":    rowsHeader + "big,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,1e12,s\n",
		"rows_tp_over_gpus.csv":     "id,kind,model,chip,dtype,gpus,tp,seq,gbs,measured,unit\n" + "g,train_step,Llama-2-7b,H100,bf16,1,8,4096,8,1.5,s\n",
		"rows_duplicate_key.json":   `[{"id":"d","kind":"ttft","model":"Llama-2-7b","chip":"H100","dtype":"fp8","isl":2048,"measured":0.036,"unit":"s","measured":0.36}]` + "\n",
		"rows_duplicate_column.csv": "id,kind,model,chip,dtype,isl,measured,unit,measured\n" + "d,ttft,Llama-2-7b,H100,fp8,2048,0.036,s,0.36\n",

		// workloads: isl,osl[,count] per line
		"workload_zero_isl.csv":  "isl,osl\n0,128\n",
		"workload_fraction.csv":  "isl,osl\n512.5,128\n",
		"workload_nan_count.csv": "isl,osl,count\n512,128,NaN\n",
		"workload_huge.csv":      "isl,osl\n1000000000,128\n",
		"workload_fields.csv":    "isl,osl\n512,128,1,7\n",
		"workload_empty.csv":     "isl,osl\n# nothing but a comment\n",

		// chips files: physical bounds, units and names
		"chips_negative_tdp.json":  chip(`"X1"`, "989", "80", "3350", "-700"),
		"chips_huge_peak.json":     chip(`"X1"`, "1e300", "80", "3350", "700"),
		"chips_huge_hbm.json":      chip(`"X1"`, "989", "80", "1e300", "700"),
		"chips_zero_memory.json":   chip(`"X1"`, "989", "0", "3350", "700"),
		"chips_string_peak.json":   chip(`"X1"`, `"lots"`, "80", "3350", "700"),
		"chips_unknown_field.json": strings.Replace(chip(`"X1"`, "989", "80", "3350", "700"), `"tdp_w"`, `"tdp_watts"`, 1),
		"chips_truncated.json":     chip(`"X1"`, "989", "80", "3350", "700")[:60],
		"chips_script_name.json":   chip(`"<script>alert(1)</script>"`, "989", "80", "3350", "700"),
	}
	// dumps: the bundled gpt2 dump with one thing broken (rehashed, so the break is what is
	// found, not a stale content hash), unless the hash is the break
	base := readGz("../../examples/dumps/gpt2.json.gz")
	good, err := ingest.Rehash(base)
	if err != nil {
		fail(err)
	}
	edit := func(from, to string, rehash bool) string {
		if !bytes.Contains(good, []byte(from)) {
			fail(fmt.Errorf("%q is not in the gpt2 dump", from))
		}
		b := bytes.Replace(good, []byte(from), []byte(to), 1)
		if rehash {
			// the hash of the text as mrep decodes it, written into the raw bytes (Rehash
			// would re-encode an escape the decoder changes)
			r, err := ingest.Rehash(b)
			if err != nil {
				fail(err)
			}
			var doc struct {
				Run struct {
					ContentHash string `json:"content_hash"`
				} `json:"run"`
			}
			if err := json.Unmarshal(r, &doc); err != nil {
				fail(err)
			}
			var old struct {
				Run struct {
					ContentHash string `json:"content_hash"`
				} `json:"run"`
			}
			json.Unmarshal(good, &old)
			b = bytes.Replace(b, []byte(old.Run.ContentHash), []byte(doc.Run.ContentHash), 1)
		}
		return string(b)
	}
	files["dump_lone_surrogate.json"] = edit(`"name":"transformer"`, `"name":"trans\ud800former"`, true)
	files["dump_nul_name.json"] = edit(`"name":"transformer"`, `"name":"trans\u0000former"`, true)
	files["dump_nan_numel.json"] = edit(`"numel":`, `"numel":NaN,"x":`, false)
	files["dump_negative_numel.json"] = edit(`"numel":768`, `"numel":-768`, true)
	files["dump_stale_hash.json"] = edit(`"n_layer":12`, `"n_layer":13`, false)
	files["dump_wrong_version.json"] = edit(`"schema_version":`, `"schema_version":99,"was":`, true)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			fail(err)
		}
	}
}

func readGz(path string) []byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		fail(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		fail(err)
	}
	return b
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
