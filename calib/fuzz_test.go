package calib

import (
	"bytes"
	"testing"
)

// FuzzParseRows: any bytes as a rows file (JSON or CSV) either parse into rows that pass
// validation or fail with an error naming the file; never a panic, never an unvalidated row.
func FuzzParseRows(f *testing.F) {
	f.Add([]byte(`{"rows":[{"id":"a","kind":"ttft","model":"m","chip":"H100","dtype":"fp8","isl":128,"measured":0.01,"unit":"s"}]}`))
	f.Add([]byte("id,kind,model,chip,dtype,isl,osl,measured,unit\nx,serving,m,H100,fp8,100,100,1000,tok/s\n"))
	f.Add([]byte(`{"rows":[{"id":"b","kind":"bench_serve","model":"m","chip":"B200","dtype":"bf16","isl":500,"osl":500,"concurrency":16,"requests":80,"metric":"ttft","stat":"median","measured":0.1,"unit":"s"}]}`))
	f.Add([]byte("id,kind\n\"unterminated"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := "rows.json"
		if len(data) > 0 && data[0] != '{' && data[0] != '[' {
			name = "rows.csv"
		}
		rows, err := Parse(name, bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, r := range rows {
			if verr := r.validate(); verr != nil {
				t.Fatalf("row %q parsed but invalid: %v", r.ID, verr)
			}
		}
	})
}
