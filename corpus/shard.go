package corpus

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
)

// Shard is one of Count disjoint parts of a manifest.
//
// Items are assigned by a stable hash: item it belongs to shard
// uint64(SHA-256(it.Key)[:8]) mod Count. The assignment depends on the item
// alone (not on the manifest's order, length or durations), so every shard
// computes it independently and reruns agree; with thousands of items the
// shards' sizes differ by a few percent (durations are not balanced).
type Shard struct {
	Index, Count int
}

// Has reports whether it belongs to the shard.
func (s Shard) Has(it *Item) bool {
	h := it.hash()
	return binary.BigEndian.Uint64(h[:8])%uint64(s.Count) == uint64(s.Index)
}

func (s Shard) String() string { return fmt.Sprintf("shard %d of %d", s.Index, s.Count) }

// name is the shard's part of the output manifest's file name.
func (s Shard) name() string { return fmt.Sprintf("shard-%05d-of-%05d", s.Index, s.Count) }

// Validate checks 0 <= Index < Count.
func (s Shard) Validate() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard index %d of %d shards: want 0 <= index < shards", s.Index, s.Count)
	}
	return nil
}

// ShardFromEnv returns the shard the environment names, for flags left
// unset (index or count < 0): the index from JOB_COMPLETION_INDEX
// (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID minus SLURM_ARRAY_TASK_MIN
// (Slurm array; MIN defaults to 0), the count from SLURM_ARRAY_TASK_COUNT
// (Kubernetes has no such variable: pass --num-shards, which the CLI also
// reads from $EDGE_NUM_SHARDS). Neither set: shard 0 of 1. getenv is
// os.Getenv when nil.
func ShardFromEnv(index, count int, getenv func(string) string) (Shard, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	num := func(name string) (int, bool, error) {
		v := getenv(name)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, false, fmt.Errorf("$%s=%q: want an integer", name, v)
		}
		return n, true, nil
	}
	if index < 0 {
		index = 0
		if n, ok, err := num("JOB_COMPLETION_INDEX"); err != nil {
			return Shard{}, err
		} else if ok {
			index = n
		} else if n, ok, err := num("SLURM_ARRAY_TASK_ID"); err != nil {
			return Shard{}, err
		} else if ok {
			lo, _, err := num("SLURM_ARRAY_TASK_MIN")
			if err != nil {
				return Shard{}, err
			}
			index = n - lo
		}
	}
	if count < 0 {
		count = 1
		if n, ok, err := num("SLURM_ARRAY_TASK_COUNT"); err != nil {
			return Shard{}, err
		} else if ok {
			count = n
		}
	}
	s := Shard{Index: index, Count: count}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%w (set the number of shards: --num-shards, $EDGE_NUM_SHARDS or $SLURM_ARRAY_TASK_COUNT)", err)
	}
	return s, nil
}
