"""agentctl: a durable, declarative runtime for policy-constrained agent workflows.

Import cost matters (``agentctl check`` should start in well under 300 ms), so this
package imports nothing heavy at the top level.
"""

__version__ = "0.1.0"
