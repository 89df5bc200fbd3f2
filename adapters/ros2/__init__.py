"""The ``ros2`` adapter: ROS 2 topics and services to MQTT and back, over Cyclone DDS.

No ROS installation: ROS 2 names, types and QoS profiles are mapped to DDS here
(``codec.py``), the built-in message types ship as IDL (``idl/``), user ``.msg`` and
``.srv`` files are converted at start (``idl_codegen.ros_msg``). The DDS machinery is the
``dds`` adapter's (``adapters.dds.adapter``). See docs/adapters/ros2.md.
"""
