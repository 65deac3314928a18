package injection

import (
	"encoding/json"
	"strings"

	"sigs.k8s.io/yaml"
)

// EditProxyMetadata changes the proxyMetadata of a proxy.istio.io/config
// value (YAML or JSON; "" is an empty config): edit is given the map (made
// when the config has none) and says whether it changed it. The result is
// the config with the change as JSON, the rest kept; a proxyMetadata left
// empty is dropped, and a config left empty is "". ok is false when the
// value does not parse, nothing changed, or the JSON holds a single quote
// (a fix quotes it in single quotes).
func EditProxyMetadata(cfg string, edit func(md map[string]any) bool) (string, bool) {
	m := map[string]any{}
	if strings.TrimSpace(cfg) != "" {
		if err := yaml.Unmarshal([]byte(cfg), &m); err != nil || m == nil {
			return "", false
		}
	}
	md, _ := m["proxyMetadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	if !edit(md) {
		return "", false
	}
	if len(md) == 0 {
		delete(m, "proxyMetadata")
	} else {
		m["proxyMetadata"] = md
	}
	if len(m) == 0 {
		return "", true
	}
	b, err := json.Marshal(m)
	if err != nil || strings.Contains(string(b), "'") {
		return "", false
	}
	return string(b), true
}
