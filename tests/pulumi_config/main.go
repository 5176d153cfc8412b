// Ground truth for mig_inference/pulumi_config.py: what a Python Pulumi program receives in
// PULUMI_CONFIG for a Pulumi.<stack>.yaml, computed with the YAML library Pulumi uses
// (gopkg.in/yaml.v3 v3.0.1) and Go's own encoding/json, strconv and time.
//
// The steps follow pulumi/pulumi (commit 1b5949891b3cefcb9974752b24a5ecef0acc86c8):
//   sdk/go/common/workspace/loaders.go    LoadProjectStackBytes: strip a UTF-8 BOM, yaml.v3
//       Unmarshal into `any`, SimplifyMarshalledProject, namespace keys without ':' with the
//       project's name, re-encode (sdk/go/common/util/yamlutil/encode.go: yaml.v3 encoder,
//       indent 2), decode again into ProjectStack whose Config is a config.Map.
//   sdk/go/common/resource/config/key.go  ParseKey: `ns:name`, or `ns:config:name`.
//   sdk/go/common/resource/config/value.go, object.go  Value.UnmarshalYAML: unmarshalObject
//       (time.Time -> its String(), map[any]any keys -> fmt "%v", {secure: <string>} -> a
//       secret), MarshalString (strings as they are, everything else JSON); a null value is
//       not given to UnmarshalYAML, so it stays the zero Value: "".
//   sdk/go/common/resource/config/plaintext.go  marshalText: what Map.Decrypt hands the
//       language host (strings as they are, everything else JSON).
//   sdk/python/cmd/pulumi-language-python/main.go  constructConfig: that map as JSON in
//       PULUMI_CONFIG, the secret keys in PULUMI_CONFIG_SECRET_KEYS.
// The Pulumi side is re-stated here (not copied); the YAML, JSON, number and time behaviour is
// the real libraries'. Secrets "decrypt" to "<plaintext of CIPHERTEXT>".
//
// Run: GO111MODULE=off GOPATH=/usr/share/gocode go run main.go < cases.json > expected.json
// (Debian's golang-go and golang-gopkg-yaml.v3-dev 3.0.1 provide both).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	yaml "gopkg.in/yaml.v3"
)

const project = "mig-inference"

type secret struct{ ciphertext string }

// object mirrors config/object.go: bool, int64, uint64, float64, string, secret, []object,
// map[string]object, or nil.
type object struct{ value any }

func fromRaw(v any) (object, error) {
	switch v := v.(type) {
	case bool, int64, uint64, float64, string:
		return object{v}, nil
	case int:
		return object{int64(v)}, nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return object{i}, nil
		}
		f, err := v.Float64()
		if err != nil {
			return object{}, fmt.Errorf("unrepresentable number %v: %w", v, err)
		}
		return object{f}, nil
	case time.Time:
		return object{v.String()}, nil
	case map[string]any:
		if len(v) == 1 {
			if s, ok := v["secure"].(string); ok {
				return object{secret{s}}, nil
			}
		}
		m := map[string]object{}
		for k, item := range v {
			o, err := fromRaw(item)
			if err != nil {
				return object{}, err
			}
			m[k] = o
		}
		return object{m}, nil
	case map[any]any:
		m := map[string]any{}
		for k, item := range v {
			m[fmt.Sprintf("%v", k)] = item
		}
		return fromRaw(m)
	case []any:
		a := make([]object, len(v))
		for i, item := range v {
			o, err := fromRaw(item)
			if err != nil {
				return object{}, err
			}
			a[i] = o
		}
		return object{a}, nil
	case nil:
		return object{}, nil
	}
	return object{}, fmt.Errorf("unexpected wire type %T", v)
}

func (o object) secure() bool {
	switch v := o.value.(type) {
	case secret:
		return true
	case []object:
		for _, item := range v {
			if item.secure() {
				return true
			}
		}
	case map[string]object:
		for _, item := range v {
			if item.secure() {
				return true
			}
		}
	}
	return false
}

// plain is the decrypted Go value handed to encoding/json.
func (o object) plain() any {
	switch v := o.value.(type) {
	case secret:
		return "<plaintext of " + v.ciphertext + ">"
	case []object:
		a := make([]any, len(v))
		for i, item := range v {
			a[i] = item.plain()
		}
		return a
	case map[string]object:
		m := map[string]any{}
		for k, item := range v {
			m[k] = item.plain()
		}
		return m
	}
	return o.value
}

// text is what the language host receives for a top-level value.
func (o object) text() (string, error) {
	if s, ok := o.value.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(o.plain())
	return string(b), err
}

// value is config.Value as stored after decoding: the string form and whether it is secret.
type value struct {
	text   string
	secure bool
	object bool
}

func (c *value) UnmarshalYAML(unmarshal func(any) error) error {
	var raw any
	if err := unmarshal(&raw); err != nil {
		return err
	}
	obj, err := fromRaw(raw)
	if err != nil {
		return err
	}
	// MarshalString: strings stay, a top-level secret keeps its ciphertext, the rest is JSON
	// (which fails on NaN and infinities).
	switch v := obj.value.(type) {
	case string:
		c.text = v
	case secret:
		c.text, c.secure = v.ciphertext, true
	default:
		b, err := json.Marshal(obj.value)
		if _, isComposite := obj.value.([]object); isComposite {
			b, err = json.Marshal(obj.plainKeepSecrets())
		} else if _, isMap := obj.value.(map[string]object); isMap {
			b, err = json.Marshal(obj.plainKeepSecrets())
		}
		if err != nil {
			return err
		}
		c.text, c.secure = string(b), obj.secure()
		_, c.object = obj.value.([]object)
		if _, isMap := obj.value.(map[string]object); isMap {
			c.object = true
		}
		if obj.value == nil {
			c.object = true
		}
	}
	return nil
}

// plainKeepSecrets is marshalObject: secrets stay {"secure": ciphertext} inside objects.
func (o object) plainKeepSecrets() any {
	switch v := o.value.(type) {
	case secret:
		return map[string]string{"secure": v.ciphertext}
	case []object:
		a := make([]any, len(v))
		for i, item := range v {
			a[i] = item.plainKeepSecrets()
		}
		return a
	case map[string]object:
		m := map[string]any{}
		for k, item := range v {
			m[k] = item.plainKeepSecrets()
		}
		return m
	}
	return o.value
}

// decrypted is Value.Value(decrypter): the stored string decoded again and its secrets opened.
func (c value) decrypted() (string, error) {
	if !c.object {
		if c.secure {
			return "<plaintext of " + c.text + ">", nil
		}
		return c.text, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(c.text)))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return "", err
	}
	obj, err := fromRaw(raw)
	if err != nil {
		return "", err
	}
	return obj.text()
}

type key struct{ namespace, name string }

func (k *key) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return fmt.Errorf("could not unmarshal key: %w", err)
	}
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 2:
		k.namespace, k.name = parts[0], parts[1]
		return nil
	case len(parts) == 3 && parts[1] == "config" && parts[0] != "" && parts[2] != "":
		k.namespace, k.name = parts[0], parts[2]
		return nil
	}
	return fmt.Errorf("could not parse %s as a configuration key "+
		"(configuration keys should be of the form `<namespace>:<name>`)", s)
}

type stackFile struct {
	Config map[key]value `yaml:"config"`
}

func simplify(v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := map[string]any{}
		for k, item := range v {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("expected only string keys, got '%s'", k)
			}
			inner, err := simplify(item)
			if err != nil {
				return nil, err
			}
			m[s] = inner
		}
		return m, nil
	case []any:
		a := make([]any, len(v))
		for i, item := range v {
			inner, err := simplify(item)
			if err != nil {
				return nil, err
			}
			a[i] = inner
		}
		return a, nil
	}
	return v, nil
}

type result struct {
	Input      string            `json:"input"`
	Config     map[string]string `json:"config,omitempty"`
	SecretKeys []string          `json:"secret_keys,omitempty"`
	EmptyKeys  []string          `json:"empty_keys,omitempty"`
	Error      string            `json:"error,omitempty"`
}

func load(text string) (res result) {
	defer func() {
		if r := recover(); r != nil {
			res = result{Error: fmt.Sprint(r)}
		}
	}()
	b := []byte(text)
	if len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
		b = b[3:]
	}
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return result{Error: err.Error()}
	}
	if raw == nil {
		return result{Config: map[string]string{}}
	}
	simple, err := simplify(raw)
	if err != nil {
		return result{Error: err.Error()}
	}
	doc, ok := simple.(map[string]any)
	if !ok {
		return result{Error: fmt.Sprintf("expected project to be an object, was '%T'", simple)}
	}
	if config, ok := doc["config"].(map[string]any); ok {
		namespaced := map[string]any{}
		for k, item := range config {
			if item == nil {
				res.EmptyKeys = append(res.EmptyKeys, k)
			}
			if strings.Contains(k, ":") {
				namespaced[k] = item
			} else {
				namespaced[project+":"+k] = item
			}
		}
		doc["config"] = namespaced
	}
	sort.Strings(res.EmptyKeys)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return result{Error: err.Error()}
	}
	var stack stackFile
	if err := yaml.Unmarshal(buf.Bytes(), &stack); err != nil {
		return result{Error: err.Error()}
	}
	res.Config = map[string]string{}
	for k, v := range stack.Config {
		text, err := v.decrypted()
		if err != nil {
			return result{Error: err.Error()}
		}
		full := k.namespace + ":" + k.name
		res.Config[full] = text
		if v.secure {
			res.SecretKeys = append(res.SecretKeys, full)
		}
	}
	sort.Strings(res.SecretKeys)
	return res
}

func main() {
	var cases map[string]string
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := map[string]result{}
	for name, text := range cases {
		res := load(text)
		res.Input = text
		out[name] = res
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, errors.Unwrap(err))
		os.Exit(2)
	}
}
