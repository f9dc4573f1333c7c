// Command bench is Polyweave's benchmark harness: it measures every
// performance figure of the project against its baseline in the same run
// and prints one table (figure, our result, baseline, ratio, goal, met).
//
//	go run ./bench            # full run, a few minutes
//	go run ./bench -quick     # about a minute
//	go run ./bench -json out.json -filter '^2 '
//
// Each figure's cases are measured with testing.Benchmark, ours and the
// baseline alternately (ours, baseline, ours, baseline...) for several
// rounds; the table quotes the medians and the median of the per-round
// ratios, since absolute times on a shared machine are noise and ratios
// are not. The benchmark bodies are plain functions shared with the
// Benchmark* wrappers of the package's tests, so
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// measures the same code. bench/README.md explains each figure and holds
// the latest table.
package main
