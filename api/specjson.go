package api

import json "github.com/go-json-experiment/json/v1"

// SpecJSON is a spec as the hook records it (the ConfigMap's spec.json).
func SpecJSON(s ClusterSpec) []byte {
	b, _ := json.Marshal(s) // typed struct: cannot fail
	return b
}

// SpecEqual: two specs record the same (a change of either is a change of what is rendered).
func SpecEqual(a, b ClusterSpec) bool { return string(SpecJSON(a)) == string(SpecJSON(b)) }
