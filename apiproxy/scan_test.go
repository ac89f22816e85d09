package apiproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzFields: on any input the scanner never panics, and on a JSON object
// it finds the keys and values encoding/json finds.
func FuzzFields(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x\"y","c":[1,{"d":"]"}],"e":{"f":[]},"g":null,"h":true}`,
		` { "stream" : true , "tools" : [ { } ] } `,
		`{"s":"\\\\"}`, `{"s":"\\\""}`, `{"a":[[[[]]]]}`, `{`, `{"a"`, `{"a":`, `[1,2`, `"x`, `{"a":1}garbage`,
		`{"metadata":{"user_id":"{\"session_id\":\"s\"}"},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]string{}
		fields(b, func(k, v []byte) bool {
			got[string(k)] = string(v)
			return true
		})
		elems(b, func([]byte) {})
		keyValues(b, "a", func([]byte) {})
		skipValue(b)
		for _, a := range []api{apiMessages, apiResponses, apiGemini} {
			parseRequest(a, "/x:streamGenerateContent", http.Header{}, b)
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil || bytes.ContainsRune(b, '\\') || !utf8.Valid(b) {
			return // not an object, or keys that may be escaped or replaced
		}
		w := map[string]string{}
		for k, v := range want {
			w[k] = string(v)
		}
		// Duplicate keys: encoding/json keeps the last, as got does.
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("fields(%q) = %q, encoding/json: %q", b, got, w)
		}
	})
}

func TestScan(t *testing.T) {
	deep := strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
	if n := skipValue([]byte(deep)); n != len(deep) {
		t.Fatalf("deep nesting: %d", n)
	}
	if n := skipValue([]byte(strings.Repeat("[", 1<<20))); n != -1 {
		t.Fatalf("unclosed nesting: %d", n)
	}
	// Members named key at any depth; the name inside a string, or as a
	// string value, is not one.
	doc := `{"messages":[{"content":"say \"tool_use_id\": \"fake\"","x":"tool_use_id"},` +
		`{"content":[{"type":"tool_result", "tool_use_id" : "t1"},{"tool_use_id":"t\u0032"}]}], "tool_use_id":7}`
	var got []string
	keyValues([]byte(doc), "tool_use_id", func(v []byte) { got = append(got, string(v)) })
	if want := []string{`"t1"`, `"t\u0032"`, `7`}; !reflect.DeepEqual(got, want) {
		t.Errorf("keyValues: %q, want %q", got, want)
	}
	for in, want := range map[string]string{`"a\"b"`: `a"b`, `"plain"`: "plain", `1`: "", `"\u00e9"`: "é", `"bad\`: ""} {
		if got := str([]byte(in)); got != want {
			t.Errorf("str(%s) = %q, want %q", in, got, want)
		}
	}
}
