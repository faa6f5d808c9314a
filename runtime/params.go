package runtime

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/knadh/koanf/maps"
)

// ParamKind is the type of an op parameter.
type ParamKind uint8

// Parameter kinds. Values given as strings (from --set, environment
// variables) are parsed; lists may be given as "1,2,3".
const (
	String ParamKind = iota
	Int
	Float
	Boolean
	Ints
	Floats
)

var paramKindNames = [...]string{String: "string", Int: "int", Float: "float", Boolean: "bool", Ints: "[]int", Floats: "[]float"}

func (k ParamKind) String() string { return paramKindNames[k] }

// ParamSpec declares one op parameter.
type ParamSpec struct {
	Name string
	Kind ParamKind
	// Default is used when the parameter is not set; nil means "unset" (the op
	// decides, e.g. from a preset). It must already have the kind's Go type:
	// string, int, float64, bool, []int or []float64 (Register panics
	// otherwise: an int default for a Float would read back as 0).
	Default any
	// Enum, when non-empty, lists the accepted values of a String parameter.
	Enum []string
	Doc  string
}

// checkDefault reports a Default that does not have the kind's Go type, or
// a String default outside Enum.
func (s ParamSpec) checkDefault() error {
	if s.Default == nil {
		return nil
	}
	ok := false
	switch s.Kind {
	case String:
		var str string
		if str, ok = s.Default.(string); ok && len(s.Enum) > 0 && !slices.Contains(s.Enum, str) {
			return fmt.Errorf("parameter %s: default %q is not one of %s", s.Name, str, strings.Join(s.Enum, " | "))
		}
	case Int:
		_, ok = s.Default.(int)
	case Float:
		_, ok = s.Default.(float64)
	case Boolean:
		_, ok = s.Default.(bool)
	case Ints:
		_, ok = s.Default.([]int)
	case Floats:
		_, ok = s.Default.([]float64)
	default:
		return fmt.Errorf("parameter %s: unknown kind %d", s.Name, s.Kind)
	}
	if !ok {
		return fmt.Errorf("parameter %s: default %v is a %T; a %v parameter needs a %s", s.Name, s.Default, s.Default, s.Kind, kindGoTypes[s.Kind])
	}
	return nil
}

var kindGoTypes = [...]string{String: "string", Int: "int", Float: "float64", Boolean: "bool", Ints: "[]int", Floats: "[]float64"}

// Params holds an op's resolved parameters: every declared parameter with
// its value converted to the declared kind, or its default.
type Params struct {
	op   string
	vals map[string]any
	set  map[string]bool
}

// ResolveParams validates cfg against specs: every key must be declared,
// every value must convert to its kind (and enum). cfg may be nested
// (keys joined with ".").
func ResolveParams(op string, specs []ParamSpec, cfg map[string]any) (Params, error) {
	flat, _ := maps.Flatten(maps.Copy(cfg), nil, ".")
	p := Params{op: op, vals: map[string]any{}, set: map[string]bool{}}
	byName := map[string]ParamSpec{}
	for _, s := range specs {
		byName[s.Name] = s
		p.vals[s.Name] = s.Default
	}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := byName[k]
		if !ok {
			return Params{}, fmt.Errorf("op %s: unknown parameter %q (known: %s)", op, k, knownParams(specs))
		}
		v, err := convertParam(s, flat[k])
		if err != nil {
			return Params{}, fmt.Errorf("op %s: parameter %s: %w", op, k, err)
		}
		p.vals[k] = v
		p.set[k] = true
	}
	return p, nil
}

func knownParams(specs []ParamSpec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func convertParam(s ParamSpec, v any) (any, error) {
	switch s.Kind {
	case String:
		str := fmt.Sprint(v)
		if len(s.Enum) > 0 {
			for _, e := range s.Enum {
				if e == str {
					return str, nil
				}
			}
			return nil, fmt.Errorf("%q is not one of %s", str, strings.Join(s.Enum, " | "))
		}
		return str, nil
	case Int:
		return toInt(v)
	case Float:
		return toFloat(v)
	case Boolean:
		switch b := v.(type) {
		case bool:
			return b, nil
		case string:
			r, err := strconv.ParseBool(b)
			if err != nil {
				return nil, fmt.Errorf("%q is not a bool", b)
			}
			return r, nil
		}
		return nil, fmt.Errorf("%v (%T) is not a bool", v, v)
	case Ints:
		return toList(v, toInt)
	case Floats:
		return toList(v, toFloat)
	}
	return nil, fmt.Errorf("unsupported parameter kind %v", s.Kind)
}

func toInt(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		if x != float64(int(x)) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int(x), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v (%T) is not an integer", v, v)
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}

func toList[T any](v any, conv func(any) (T, error)) ([]T, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case string:
		if strings.TrimSpace(x) == "" {
			return []T{}, nil
		}
		for _, f := range strings.Split(strings.Trim(x, "[]"), ",") {
			items = append(items, f)
		}
	default:
		items = []any{v}
	}
	out := make([]T, len(items))
	for i, it := range items {
		c, err := conv(it)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

func (p Params) get(name string) any {
	v, ok := p.vals[name]
	if !ok {
		panic(fmt.Sprintf("edge: op %s has no parameter %q", p.op, name))
	}
	return v
}

// IsSet reports whether the parameter was given explicitly (not defaulted).
func (p Params) IsSet(name string) bool { p.get(name); return p.set[name] }

// IsNil reports whether the parameter has no value (unset and no default).
func (p Params) IsNil(name string) bool { return p.get(name) == nil }

// Str returns a String parameter ("" when nil).
func (p Params) Str(name string) string {
	v, _ := p.get(name).(string)
	return v
}

// Int returns an Int parameter (0 when nil).
func (p Params) Int(name string) int {
	v, _ := p.get(name).(int)
	return v
}

// Float returns a Float parameter (0 when nil).
func (p Params) Float(name string) float64 {
	v, _ := p.get(name).(float64)
	return v
}

// Bool returns a Boolean parameter (false when nil).
func (p Params) Bool(name string) bool {
	v, _ := p.get(name).(bool)
	return v
}

// IntList returns an Ints parameter.
func (p Params) IntList(name string) []int {
	v, _ := p.get(name).([]int)
	return v
}

// FloatList returns a Floats parameter.
func (p Params) FloatList(name string) []float64 {
	v, _ := p.get(name).([]float64)
	return v
}

// Map returns the resolved values, for display.
func (p Params) Map() map[string]any {
	out := make(map[string]any, len(p.vals))
	for k, v := range p.vals {
		out[k] = v
	}
	return out
}
