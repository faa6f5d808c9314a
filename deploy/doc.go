// Package deploy holds no code: its directory keeps the Kubernetes Indexed
// Job manifest and the Slurm array script that run `edge batch` as a
// sharded worker, and its test validates them (the Job against the
// Kubernetes API types, strictly; the script with bash -n and a dry run).
package deploy
