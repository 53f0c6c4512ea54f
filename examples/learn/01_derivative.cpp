// 01_derivative.cpp — chapter 1 of docs/learn: one derivative, three ways.
//
//   f(x)  = x³ − 2x²          (written with tensor ops, so the tape records it)
//   f'(x) = 3x² − 4x          (by hand, with the power rule)
//
// 1. backward() on a 0-d float64 tensor x leaves df/dx in x.grad().
// 2. The finite-difference slopes approach it as h shrinks:
//      forward  (f(x+h) − f(x)) / h         error ≈ h·f''(x)/2         (first order)
//      central  (f(x+h) − f(x−h)) / 2h      error ≈ h²·f'''(x)/6       (second order)
//    until round-off wins: f is only known to ~1e-16·|f|, and dividing by h magnifies that
//    to ~1e-16·|f|/h, so below some h the error grows again.
// 3. A verdict: backward, the hand-written f' and the central difference agree at several x.
//
// Exercise 1: change f and f_prime below (say f = x·tanh(x)); the last line says MATCH when your f'
// agrees with backward() everywhere, MISMATCH (and where) when it does not.
// Exercise 2: change f, predict the h of the smallest central error, write it into kPredictedBestH: the
// line after the table says RIGHT or WRONG.
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

// ---- the function and its derivative (change both for the exercise) ----
// (One op per statement: C++ leaves the order of the two sides of `a - b` to the compiler, and the
// tape printed below would list the entries in a different order with another compiler.)
Tensor f(const Tensor& x) {
  Tensor cube = x * x * x;
  Tensor square_times_2 = 2.0 * x * x;
  return cube - square_times_2;
}
double f_prime(double x) { return 3 * x * x - 4 * x; }

// ---- exercise 2: your prediction of the h where the central difference's error is smallest ----
// (a power of ten; the program finds the minimum of the table's last column and compares)
constexpr double kPredictedBestH = 1e-5;

// f at a plain number, without recording anything on the tape.
double f_at(double x) {
  NoGradGuard no_grad;
  return f(scalar_tensor(x, kFloat64)).item();
}

// df/dx at x0 by reverse mode: a fresh leaf, one forward, one backward.
double slope_by_backward(double x0) {
  Tensor x = scalar_tensor(x0, Options(kFloat64).requires_grad());
  f(x).backward();
  return x.grad().item();
}

}  // namespace

int run() {
  const double x0 = 1.5;

  // --- 1. backward() ---
  Tensor x = scalar_tensor(x0, Options(kFloat64).requires_grad());
  x.set_name("x");
  Tensor y = f(x);
  fmt::print("f({}) = {:.6f}\n", x0, y.item());
  fmt::print("{}", tape_string(y));
  y.backward();  // y is 0-d, so dy/dy = 1 is implied
  fmt::print("backward():  df/dx = {:.12f}\n", x.grad().item());
  fmt::print("by hand:     f'(x) = {:.12f}\n\n", f_prime(x0));

  // --- 2. finite differences: the error shrinks with h, then round-off takes over ---
  const double exact = x.grad().item();
  fmt::print("{:>8}  {:>15}  {:>9}  {:>15}  {:>9}\n", "h", "forward slope", "error", "central slope", "error");
  double best_h = 0, best_error = 0;
  for (int k = 1; k <= 12; ++k) {
    const double h = std::pow(10.0, -k);
    const double forward = (f_at(x0 + h) - f_at(x0)) / h;
    const double central = (f_at(x0 + h) - f_at(x0 - h)) / (2 * h);
    fmt::print("{:>8.0e}  {:>15.12f}  {:>9.2e}  {:>15.12f}  {:>9.2e}\n", h, forward, std::abs(forward - exact),
               central, std::abs(central - exact));
    if (k == 1 || std::abs(central - exact) < best_error) best_h = h, best_error = std::abs(central - exact);
  }
  // Neighbouring rows near the minimum can be within round-off of each other: a factor 10 either way counts.
  const double ratio = kPredictedBestH / best_h;
  const bool predicted = ratio >= 0.099 && ratio <= 10.1;
  fmt::print("smallest central error at h = {:.0e}; your prediction kPredictedBestH = {:.0e}: {}\n", best_h,
             kPredictedBestH, predicted ? "RIGHT (within a factor 10)" : "WRONG (more than a factor 10 off)");

  // --- 3. the verdict, at several points ---
  bool all_match = true;
  for (double at : {-2.0, -0.5, 0.0, 0.7, 1.5, 3.0}) {
    const double by_tape = slope_by_backward(at);
    const double by_hand = f_prime(at);
    const double by_difference = (f_at(at + 1e-5) - f_at(at - 1e-5)) / 2e-5;
    const double scale = 1.0 + std::abs(by_tape);
    if (std::abs(by_tape - by_hand) > 1e-9 * scale) {
      fmt::print("MISMATCH at x = {}: backward {:.9f}, your f' {:.9f}\n", at, by_tape, by_hand);
      all_match = false;
    }
    if (std::abs(by_tape - by_difference) > 1e-6 * scale) {
      fmt::print("MISMATCH at x = {}: backward {:.9f}, central difference {:.9f}\n", at, by_tape, by_difference);
      all_match = false;
    }
  }
  fmt::print("{}: backward(), f' and the central difference at x = -2, -0.5, 0, 0.7, 1.5, 3\n",
             all_match ? "MATCH" : "MISMATCH");
  return all_match && predicted ? 0 : 1;
}

// An error (a shape that does not fit, say, after an edit) is printed as one line, not a crash.
int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
