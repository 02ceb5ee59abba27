package store

import (
	"net/url"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"mrep.db": "mrep.db",
		"postgres://u:s3cret@db:5432/mrep?sslmode=require": "postgres://u:xxxxx@db:5432/mrep?sslmode=require",
		"postgresql://u@db/mrep":                           "postgresql://u@db/mrep",
		"postgres://db/mrep?password=s3cret&user=u":        "postgres://db/mrep?password=xxxxx&user=u",
		"postgres://u:s3%3Acret@db/mrep":                   "postgres://u:xxxxx@db/mrep",
		"postgres://u:pw@[bad":                             "postgres://(unparsable URL)",
		// an unencoded password: nothing of it survives (a second @, a '#', a space)
		"postgres://me:p@ss#wo/rd:%25?x y@host/db": "postgres://(unparsable URL)",
		"Postgres://u:s3cret@db/mrep":              "postgres://u:xxxxx@db/mrep",
		"host=db dbname=mrep password=s3cret":      "(a libpq keyword string, withheld)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// No password that a URL carries survives Redact, whatever else the URL holds: the output, read
// back as a URL, carries xxxxx wherever a password was.
func FuzzRedact(f *testing.F) {
	f.Add("postgres://u:s3cret@db:5432/mrep?sslmode=require")
	f.Add("postgres://db/mrep?password=s3cret")
	f.Add("postgresql://u:p%40ss@h/d?PASSWORD=x&sslpassword=y")
	f.Fuzz(func(t *testing.T, s string) {
		out := Redact(s)
		if !IsPostgres(s) && !IsKeywordDSN(s) {
			if out != s {
				t.Fatalf("a path changed: %q -> %q", s, out)
			}
			return
		}
		if IsKeywordDSN(s) {
			// a libpq keyword string (even one that starts like a URL) is withheld whole
			if out != "(a libpq keyword string, withheld)" {
				t.Fatalf("a keyword string was echoed: %q", out)
			}
			return
		}
		if _, err := url.Parse(s); err != nil || CheckLocation(s) != nil {
			// what cannot be parsed, or names no place mrep can use ("postgres://#"), is
			// withheld whole: only the scheme is echoed
			if strings.Contains(out, "@") || strings.Contains(out, "?") || !strings.HasSuffix(out, "://(unparsable URL)") {
				t.Fatalf("an unparsable URL was echoed: %q", out)
			}
			return
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("Redact(%q) = %q does not parse: %v", s, out, err)
		}
		if u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "xxxxx" {
				t.Fatalf("Redact(%q) = %q keeps the password %q", s, out, pw)
			}
		}
		for k, vs := range u.Query() {
			if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
				for _, v := range vs {
					if v != "xxxxx" {
						t.Fatalf("Redact(%q) = %q keeps %s=%q", s, out, k, v)
					}
				}
			}
		}
	})
}

// --db values mrep cannot use as written are refused without a word of what they hold: a libpq
// keyword string (it would otherwise name a SQLite file, password and all), a URL whose password
// needs percent-encoding (the driver would read part of it as the host).
func TestCheckLocation(t *testing.T) {
	for _, bad := range []string{"host=db password=s3cret", "postgres://me:p@ss@host/db", "postgres://me:pw#x@host/db", "postgres://me:a b@host/db"} {
		err := CheckLocation(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "p@ss") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, ok := range []string{"mrep.db", "dir/with space/mrep.db", "postgres://me@host/db?sslmode=require", "postgres://me:p%40ss@host/db"} {
		if err := CheckLocation(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}
