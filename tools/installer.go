package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// InstallerOptions configure [NewInstaller]. A nil *InstallerOptions or a
// zero field means the default; options are copied.
type InstallerOptions struct {
	// RouterOptions give the name (default "tool-installer"), the tools
	// and handlers (map handlers run async), breaker and supervision.
	RouterOptions
	// ToolsParam is the value of the injected "tools" PARAM; default: the
	// tools in OpenAI chat format ([FunctionList]). No "tools" PARAM is
	// injected when there are no tools and no ToolsParam.
	ToolsParam json.RawMessage
	// ToolChoice, when set, is injected as the "tool_choice" PARAM (for
	// example "auto" or {"type":"function","function":{"name":"x"}}).
	ToolChoice json.RawMessage
	// SystemPrompt, when set, is prepended to the messages as a system
	// message if the first frame of a request is a "messages" PARAM.
	SystemPrompt string
	// Once installs into the first request the installer receives only
	// (per incarnation: a restarted installer installs again), as the
	// JavaScript package's installer does. By default every request gets
	// them: each new conversation a long-running host sends through one
	// installer has its tools.
	Once bool
}

// toolsParam is the value of the "tools" PARAM to inject, or nil.
func toolsParam(explicit json.RawMessage, all []*Tool) json.RawMessage {
	if len(explicit) > 0 {
		return explicit
	}
	if len(all) == 0 {
		return nil
	}
	last := &lastToolsParam
	last.mu.Lock()
	defer last.mu.Unlock()
	if !slices.Equal(last.tools, all) {
		last.tools, last.param = slices.Clone(all), FunctionList(all)
	}
	return last.param
}

// lastToolsParam is the tools PARAM made last, with the tools it lists:
// the many agents or stages a host starts with one tool set share one
// encoding (a tool's definition never changes, nor a frame's payload)
// instead of each keeping its own.
var lastToolsParam struct {
	mu    sync.Mutex
	tools []*Tool
	param json.RawMessage
}

// NewInstaller returns the spec of a tool installer around inner: before
// the first frame of every request (a stream's first PARAM or END, and the
// first after each END of that stream) it injects a "tools" PARAM and a
// "tool_choice" PARAM, and, when that frame is a "messages" PARAM,
// prepends SystemPrompt to the messages as {"role":"system",...}. The
// request's other frames pass unchanged, and so do the frames of any
// request after the first with [InstallerOptions].Once. On the response
// path it is an async router ([NewAsyncRouter]): TOOL_CALLs run on its
// tool actors and their results go into inner's sink.
func NewInstaller(inner actors.Spec, o *InstallerOptions) (actors.Spec, error) {
	var opts InstallerOptions
	if o != nil {
		opts = *o
	}
	ropts, all, err := opts.RouterOptions.prepare(&inner, "tool-installer", false)
	if err != nil {
		return actors.Spec{}, err
	}
	if len(opts.ToolChoice) > 0 && !json.Valid(opts.ToolChoice) {
		return actors.Spec{}, fmt.Errorf("installer %q: tool choice is not JSON", ropts.Name)
	}
	tp := toolsParam(opts.ToolsParam, all)
	if len(tp) > 0 && !json.Valid(tp) {
		return actors.Spec{}, fmt.Errorf("installer %q: tools param is not JSON", ropts.Name)
	}
	var system json.RawMessage // encoded once, sent with every request
	if opts.SystemPrompt != "" {
		system = systemMessage(opts.SystemPrompt)
	}
	spec := actors.Wrap(ropts.Name, inner, func() actors.Wrapped {
		r := newRouterLogic(all, ropts.Breaker)
		in := &installation{tools: tp, toolChoice: opts.ToolChoice, system: system, once: opts.Once}
		r.install = in.request
		return r
	})
	spec.Supervision = ropts.Supervision
	return spec, nil
}

// installation is the request side of an installer: it knows which
// streams are in the middle of a request (installed already).
type installation struct {
	tools, toolChoice json.RawMessage
	system            json.RawMessage // the system prompt's message, encoded once; nil without one
	once              bool

	done    bool            // with once: installed
	sending map[string]bool // streams whose current request got them
}

func (in *installation) request(c actors.WrapperContext, f *messages.Frame) {
	stream := f.GetStreamId()
	switch t := f.GetType(); {
	case t != messages.FrameType_PARAM && t != messages.FrameType_END:
		if t == messages.FrameType_CANCEL || t == messages.FrameType_ABORT {
			delete(in.sending, stream)
		}
		c.ToInner(f)
		return
	case in.once && in.done, in.sending[stream]:
		if t == messages.FrameType_END {
			delete(in.sending, stream)
		}
		c.ToInner(f)
		return
	}
	in.done = true
	if f.GetType() == messages.FrameType_PARAM {
		if in.sending == nil {
			in.sending = map[string]bool{}
		}
		in.sending[stream] = true
	}
	if len(in.tools) > 0 {
		c.ToInner(messages.RawParam(stream, models.ParamTools, in.tools))
	}
	if len(in.toolChoice) > 0 {
		c.ToInner(messages.RawParam(stream, models.ParamToolChoice, in.toolChoice))
	}
	if f.IsParam(models.ParamMessages) && in.system != nil {
		list, err := models.SplitMessages(f.GetPayload())
		if err != nil {
			c.Logger().Warn("messages PARAM is not a JSON array; system prompt not installed", "error", err)
			c.ToInner(f)
			return
		}
		c.ToInner(messages.RawParam(stream, models.ParamMessages, models.JoinMessages(append([]json.RawMessage{in.system}, list...))))
		return
	}
	c.ToInner(f)
}
