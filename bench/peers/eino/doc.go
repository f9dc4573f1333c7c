// Command eino is the figure 7 peer (d) of the Polyweave benchmark harness:
// the scripted three-tool conversation run by CloudWeGo Eino's ReAct agent
// (flow/agent/react, which drives a compose ToolsNode) with a scripted chat
// model and three no-op tools built with utils.InferTool.
//
// Usage:
//
//	go run . [--runs N] [--warmup K]
//
// It prints one JSON line on stdout:
//
//	{"peer":"eino","version":"<eino version>","runtime":"<go version>","runs":N,
//	 "seconds":S,"runs_per_sec":R,"ns_per_run":X}
//
// and exits 1 when a run strays from the script (a tool not run exactly once,
// wrong arguments, a model call count other than 4, a final answer other than
// "done"), 2 on bad arguments.
//
// The peer lives in its own module so that Eino and its dependencies stay out
// of the library's go.mod.
package main
