// Package examples ships the bundled model dumps inside the binary, so that `mrep validate`
// and `mrep calibrate` resolve the calibration set's models from any directory.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/model"
)

//go:embed dumps/*.json.gz
var dumps embed.FS

// Dump opens the bundled dump of a model by name (the file name without .json.gz).
func Dump(name string) (fs.File, error) {
	if strings.ContainsAny(name, "/\\") || name == "" || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("bundled model %q: not a model name", name)
	}
	return dumps.Open("dumps/" + name + ".json.gz")
}

// Decode reads and checks a bundled dump by name, as `mrep ingest` would.
func Decode(name string) (*model.Dump, error) {
	f, err := Dump(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ingest.Decode(name+".json.gz", f, ingest.Options{})
}

// Resolve finds a bundled model for a name as rows write it: the exact name, a path to the
// dump ("examples/dumps/Llama-2-7b.json.gz"), or a case-insensitive name, else the one
// bundled model whose name starts with it ("Llama-3.1-70B" for Llama-3.1-70B-Instruct).
func Resolve(name string) (string, bool) {
	n := name
	if i := strings.LastIndexAny(n, "/\\"); i >= 0 {
		n = n[i+1:]
	}
	n = strings.TrimSuffix(strings.TrimSuffix(n, ".gz"), ".json")
	names := Names()
	for _, b := range names {
		if b == n {
			return b, true
		}
	}
	for _, b := range names {
		if strings.EqualFold(b, n) {
			return b, true
		}
	}
	if hit := Prefixed(n); len(hit) == 1 {
		return hit[0], true
	}
	return "", false
}

// Prefixed lists the bundled models whose names start with name, ignoring case: one is the
// model a short name means; several are what an ambiguous one could mean.
func Prefixed(name string) []string {
	var hit []string
	for _, b := range Names() {
		if len(name) > 0 && strings.HasPrefix(strings.ToLower(b), strings.ToLower(name)) {
			hit = append(hit, b)
		}
	}
	return hit
}

// Names lists the bundled models.
func Names() []string {
	ents, _ := dumps.ReadDir("dumps")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json.gz"); ok {
			out = append(out, n)
		}
	}
	return out
}

// hfIDs are the Hugging Face repositories the zoo's configs come from (examples/configs and its
// README's provenance table): what a launch command loads when a zoo model is planned by name.
// Variants mrep built itself (Llama-3.1-8B-mha, DeepSeek-V3-allmoe, the tiny traces) have none.
var hfIDs = map[string]string{
	"DeepSeek-R1": "deepseek-ai/DeepSeek-R1", "DeepSeek-V3": "deepseek-ai/DeepSeek-V3", "DeepSeek-V3.2": "deepseek-ai/DeepSeek-V3.2",
	"DeepSeek-V2": "deepseek-ai/DeepSeek-V2", "DeepSeek-V2-Lite": "deepseek-ai/DeepSeek-V2-Lite",
	"Kimi-K2-Instruct": "moonshotai/Kimi-K2-Instruct",
	"Llama-2-70b":      "meta-llama/Llama-2-70b-hf", "Llama-2-7b": "meta-llama/Llama-2-7b-hf",
	"Llama-3.1-405B": "meta-llama/Llama-3.1-405B", "Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B-Instruct",
	"Llama-3.1-8B": "meta-llama/Llama-3.1-8B", "Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B-Instruct",
	"Llama-3.2-3B-Instruct":              "meta-llama/Llama-3.2-3B-Instruct",
	"Llama-4-Maverick-17B-128E-Instruct": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
	"Llama-4-Scout-17B-16E-Instruct":     "meta-llama/Llama-4-Scout-17B-16E-Instruct",
	"MiniMax-M2.5":                       "MiniMaxAI/MiniMax-M2.5",
	"Mistral-7B-v0.1":                    "mistralai/Mistral-7B-v0.1", "Mixtral-8x22B-v0.1": "mistralai/Mixtral-8x22B-v0.1",
	"Mixtral-8x7B-v0.1": "mistralai/Mixtral-8x7B-v0.1",
	"Qwen2.5-14B":       "Qwen/Qwen2.5-14B", "Qwen2.5-32B": "Qwen/Qwen2.5-32B", "Qwen2.5-3B": "Qwen/Qwen2.5-3B", "Qwen2.5-7B": "Qwen/Qwen2.5-7B",
	"Qwen3-0.6B": "Qwen/Qwen3-0.6B", "Qwen3-1.7B": "Qwen/Qwen3-1.7B", "Qwen3-14B": "Qwen/Qwen3-14B", "Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B",
	"Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B", "Qwen3-32B": "Qwen/Qwen3-32B", "Qwen3-4B": "Qwen/Qwen3-4B", "Qwen3-8B": "Qwen/Qwen3-8B",
	"Qwen3-Coder-480B-A35B-Instruct": "Qwen/Qwen3-Coder-480B-A35B-Instruct",
	"gemma-2-27b":                    "google/gemma-2-27b", "gemma-2-2b": "google/gemma-2-2b", "gemma-2-9b": "google/gemma-2-9b",
	"gemma-3-1b-it": "google/gemma-3-1b-it", "gemma-3-27b-it": "google/gemma-3-27b-it", "gemma-3-4b-it": "google/gemma-3-4b-it",
	"gpt-oss-120b": "openai/gpt-oss-120b", "gpt-oss-20b": "openai/gpt-oss-20b", "gpt2": "openai-community/gpt2",
	"phi-4": "microsoft/phi-4",
}

// HFID is the Hugging Face id of a zoo model ("" for one mrep built itself or a name not in the zoo).
func HFID(name string) string { return hfIDs[name] }
