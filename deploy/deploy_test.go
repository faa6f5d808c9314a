package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The Job decodes strictly into the Kubernetes batch/v1 API types (an
// unknown or misspelt field, a wrong type or a bad quantity fails), and
// its parts agree: an Indexed Job whose completions equal the shards edge
// is told, restartPolicy Never (backoffLimitPerIndex needs it), a GPU
// limit, and every volume mount backed by a volume.
func TestKubernetesJob(t *testing.T) {
	b, err := os.ReadFile("kubernetes/edge-batch-job.yaml")
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(b, &job))
	assert.Equal(t, "batch/v1", job.APIVersion)
	assert.Equal(t, "Job", job.Kind)
	assert.Empty(t, validation.IsDNS1123Subdomain(job.Name))

	s := job.Spec
	require.NotNil(t, s.CompletionMode)
	assert.Equal(t, batchv1.IndexedCompletion, *s.CompletionMode)
	require.NotNil(t, s.Completions)
	require.NotNil(t, s.Parallelism)
	assert.LessOrEqual(t, *s.Parallelism, *s.Completions)
	pod := s.Template.Spec
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.NotEmpty(t, c.Image)
	require.GreaterOrEqual(t, len(c.Args), 2)
	assert.Equal(t, "batch", c.Args[0])
	assert.Contains(t, []string{"transcribe", "align", "tokenize"}, c.Args[1])
	assert.True(t, slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--manifest=") }))
	assert.True(t, slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--out=") }))

	shards := ""
	for _, e := range c.Env {
		if e.Name == "EDGE_NUM_SHARDS" {
			shards = e.Value
		}
		assert.NotEqual(t, "JOB_COMPLETION_INDEX", e.Name, "Kubernetes sets it")
	}
	assert.Equal(t, strconv.Itoa(int(*s.Completions)), shards, "EDGE_NUM_SHARDS = completions")

	gpu, ok := c.Resources.Limits["nvidia.com/gpu"]
	require.True(t, ok, "a GPU limit")
	assert.Equal(t, int64(1), gpu.Value())

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	require.NotEmpty(t, c.VolumeMounts)
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		require.True(t, ok, "mount %s has no volume", m.Name)
		assert.True(t, v.PersistentVolumeClaim != nil || v.CSI != nil, "volume %s: a PVC or a CSI (object store) volume", m.Name)
	}
}

// A field Kubernetes does not know fails the strict decode: the check above
// has teeth.
func TestKubernetesJobStrict(t *testing.T) {
	b, err := os.ReadFile("kubernetes/edge-batch-job.yaml")
	require.NoError(t, err)
	bad := strings.Replace(string(b), "completionMode: Indexed", "completionMode: Indexed\n  completionz: 8", 1)
	var job batchv1.Job
	assert.ErrorContains(t, yaml.UnmarshalStrict([]byte(bad), &job), "completionz")
	bad = strings.Replace(string(b), `nvidia.com/gpu: "1"`, `nvidia.com/gpu: "one"`, 1)
	assert.Error(t, yaml.UnmarshalStrict([]byte(bad), &job))
}

const script = "slurm/edge-batch.sbatch"

// The sbatch script parses (bash -n), declares an array and a GPU, and a
// dry run as array task 3 of 8 prints the edge command it would run.
func TestSlurmScript(t *testing.T) {
	out, err := exec.Command("bash", "-n", script).CombinedOutput()
	require.NoError(t, err, string(out))

	b, err := os.ReadFile(script)
	require.NoError(t, err)
	directives := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#SBATCH --([a-z-]+)(?:=(\S+))?`).FindAllStringSubmatch(string(b), -1) {
		directives[m[1]] = m[2]
	}
	assert.Regexp(t, `^\d+-\d+$`, directives["array"])
	assert.Equal(t, "gpu:1", directives["gres"])
	assert.Contains(t, directives, "requeue")

	run := func(env ...string) (string, error) {
		cmd := exec.Command("bash", script)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "EDGE_DRY_RUN=1"}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	got, err := run("MANIFEST=/data/m.jsonl", "OUT=/data/out", "SLURM_ARRAY_TASK_ID=3", "SLURM_ARRAY_TASK_COUNT=8", "MODE=align")
	require.NoError(t, err, got)
	assert.Equal(t, "shard 3 of 8: edge batch align --manifest /data/m.jsonl --out /data/out --jobs 2 --backend cuda --execution-provider cuda --fallback cpu --progress json\n", got)

	got, err = run("OUT=/data/out", "SLURM_ARRAY_TASK_ID=3")
	assert.Error(t, err)
	assert.Contains(t, got, "set MANIFEST")
	got, err = run("MANIFEST=/data/m.jsonl", "OUT=/data/out")
	assert.Error(t, err)
	assert.Contains(t, got, "job array")
}
