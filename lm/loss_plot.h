// loss_plot.h — DIR/loss.svg: train and validation loss of a run as a self-contained SVG (no
// scripts, no external fonts or styles; opens in any browser). Two panels side by side, the same
// loss axis: against the optimizer step (left) and against training wall time (right). Each panel
// draws each curve as ONE <path> (class "train" / "val"); validation points also get dots; an optional dashed
// reference line (class "reference") marks the loss of a model without context.
#pragma once
#include <string>
#include <vector>

#include "lm/metrics_log.h"

namespace tapegrad::lm {

struct LossPlotOptions {
  bool log_scale = false;        // the loss axis logarithmic (`train --loss-plot log`): late, small gains stay visible
  double reference_loss = 0;     // > 0: a dashed line at this loss, e.g. the training tokens' unigram entropy —
  std::string reference_label;   // the loss of a model that ignores the context — labelled with this text
};

// `title` is printed above the panels (XML-escaped). Non-finite losses are left out (and, on a log axis, losses
// that are not positive: the axis is then linear).
std::string loss_svg(const std::vector<MetricRecord>& records, const std::string& title,
                     const LossPlotOptions& options = {});

}  // namespace tapegrad::lm
