package apiproxy

import (
	"bytes"
	"encoding/json"
)

// A request body is mostly text the proxy does not need (a system prompt,
// tool schemas, the conversation); decoding it whole with encoding/json
// costs about a millisecond per 80 KB. These helpers walk a JSON document
// and hand out the raw bytes of the values asked for, skipping the rest at
// the speed of bytes.IndexByte. They never fail loudly: malformed input
// yields fewer values. They do not validate what they skip (the upstream
// does), and nesting is skipped without recursion.

// skipValue returns the length of the JSON value at the start of b (after
// white space), or -1 when there is none.
func skipValue(b []byte) int {
	i := skipSpace(b, 0)
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end := skipString(b, i)
		if end < 0 {
			return -1
		}
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number, true, false or null.
	j := i
	for j < len(b) && !delim(b[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// skipString returns the index just after the string that starts at b[i]
// (a '"'), or -1 if it does not end.
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// Escaped when preceded by an odd number of backslashes.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}

func delim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// fields calls fn with each key (raw, without its quotes) and raw value
// of the JSON object b, until fn returns false.
func fields(b []byte, fn func(key, val []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return
		}
		end := skipString(b, i)
		if end < 0 {
			return
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i++
		n := skipValue(b[i:])
		if n < 0 {
			return
		}
		val := bytes.TrimLeft(b[i:i+n], " \t\r\n")
		if !fn(key, val) {
			return
		}
		i = skipSpace(b, i+n)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// elems calls fn with each raw element of the JSON array b.
func elems(b []byte, fn func(val []byte)) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == ']' {
			return
		}
		n := skipValue(b[i:])
		if n < 0 {
			return
		}
		fn(bytes.TrimLeft(b[i:i+n], " \t\r\n"))
		i = skipSpace(b, i+n)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// nonEmptyArray reports whether b is a JSON array with an element.
func nonEmptyArray(b []byte) bool {
	if len(b) == 0 || b[0] != '[' {
		return false
	}
	i := skipSpace(b, 1)
	return i < len(b) && b[i] != ']'
}

// str decodes a raw JSON string, "" if b is not one.
func str(b []byte) string {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return ""
	}
	if bytes.IndexByte(b[1:len(b)-1], '\\') < 0 {
		return string(b[1 : len(b)-1])
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	return s
}

// field returns the raw value of key in the JSON object b, nil if absent.
func field(b []byte, key string) []byte {
	var out []byte
	fields(b, func(k, v []byte) bool {
		if string(k) == key {
			out = v
			return false
		}
		return true
	})
	return out
}

// keyValues calls fn with the raw value of every member named key, at any
// depth of the JSON document b, in one pass. A string in the document
// cannot hold an unescaped quote, so an unescaped "key" followed by a
// colon is a member's name wherever it is found.
func keyValues(b []byte, key string, fn func(val []byte)) {
	pat := make([]byte, 0, len(key)+2)
	pat = append(append(append(pat, '"'), key...), '"')
	for i := 0; ; {
		k := bytes.Index(b[i:], pat)
		if k < 0 {
			return
		}
		at := i + k
		i = at + len(pat)
		n := 0
		for p := at - 1; p >= 0 && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 1 {
			continue // inside a string
		}
		j := skipSpace(b, i)
		if j >= len(b) || b[j] != ':' {
			continue // a string value, not a name
		}
		j = skipSpace(b, j+1)
		v := skipValue(b[j:])
		if v < 0 {
			return
		}
		fn(b[j : j+v])
		i = j + v
	}
}
